package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// TestTasksRollingRestart: SIGTERM and restart every node in turn while
// tasks flow to a slowish destination, so calls are under way on every
// node at each stop and at each return. No accepted task is lost and none
// is delivered twice: a stopping node lets its calls end and writes their
// results before it drains, and when it returns, the owners whose shards
// move back to it hand them over first (queue/handover.go). Before, a
// three-node rolling restart delivered 26 tasks twice (and 4–13 with only
// the stopping node's half).
func TestTasksRollingRestart(t *testing.T) {
	t.Run("raft", func(t *testing.T) { testTasksRollingRestart(t) })
	// The leader's hand-over call over HTTPS with its node token.
	t.Run("secure", func(t *testing.T) { testTasksRollingRestart(t, secureClusterOptions(t)) })
	t.Run("postgres", func(t *testing.T) {
		srv := pgServer(t)
		testTasksRollingRestart(t, pgOptions(srv.URL("postgres")))
	})
}

func testTasksRollingRestart(t *testing.T, opts ...ClusterOptions) {
	c, dest, l := busyCluster(t, "rolling", 200*time.Millisecond, opts...)
	handedOver := 0.0
	for _, p := range c.Procs {
		testwait.ForErr(t, convergeTimout, "calls under way", func() error {
			if n := len(dest.HeldAt(time.Now())); n == 0 {
				return fmt.Errorf("no call held at the destination")
			}
			return nil
		})
		before := l.Stats().Accepted
		begin := time.Now()
		if err := p.Stop(); err != nil {
			t.Fatalf("graceful stop of %s: %v", p.Name(), err)
		}
		stopped := time.Since(begin)
		if err := p.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		testwait.ForErr(t, convergeTimout, "3 alive members and 3 voters after restarting "+p.Name(), func() error { return c.CheckMembership(3) })
		testwait.ForErr(t, convergeTimout, p.Name()+" owning shards again and 10 more tasks accepted", func() error {
			if n, err := ownedBy(c, p.Name()); err != nil || n == 0 {
				return fmt.Errorf("%s owns %d shards (%v)", p.Name(), n, err)
			}
			if s := l.Stats(); s.Accepted < before+10 {
				return fmt.Errorf("%d accepted since the stop (last error %v)", s.Accepted-before, s.LastErr)
			}
			return nil
		})
		// The leader that moved shards back to p counted its hand-overs
		// (a restarted node's counters start again at 0).
		for _, q := range c.Procs {
			if m, err := scrapeMetrics(q); err == nil {
				handedOver = max(handedOver, metricSum(m, "fusebox_shard_handovers_total", `result="ok"`))
			}
		}
		t.Logf("%s: SIGTERM→exit %v, back and owning shards after %v", p.Name(), stopped.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	}
	rep := l.Check(t, 2*convergeTimout)
	t.Logf("rolling restart under tasks: %v; submits %v; hand-overs counted by a leader: %v", rep, l.Stats(), handedOver)
	for _, p := range c.Procs {
		t.Logf("%s", queueFigures(p))
	}
	if rep.Duplicates != 0 {
		t.Errorf("%d duplicate deliveries in a rolling restart, e.g. %v", rep.Duplicates, first(rep.DupTasks, 10))
	}
	if handedOver == 0 {
		t.Errorf("no leader counted a hand-over: shards moved back to the restarted nodes without one")
	}
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}

// TestTasksOperatorDrain: an operator drains a node under load, then
// undrains it, moves one shard by hand, closes a shard with calls under
// way, and transfers the Raft leadership: each move is planned, handed
// over by the shard's live owner first (the close too: it used to fence
// the calls under way out, and they were made again), and a leadership
// change moves no shard, so no task is delivered twice.
func TestTasksOperatorDrain(t *testing.T) {
	c, dest, l := busyCluster(t, "drain", 200*time.Millisecond)
	ctx := t.Context()
	admin := c.Procs[0].Client()
	victim := c.Procs[1].Name()
	held := func() error {
		if n := len(dest.HeldAt(time.Now())); n == 0 {
			return fmt.Errorf("no call held at the destination")
		}
		return nil
	}
	testwait.ForErr(t, convergeTimout, "calls under way", held)
	if _, err := admin.DrainNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, victim+" owning nothing", func() error {
		if n, err := ownedBy(c, victim); err != nil || n != 0 {
			return fmt.Errorf("%s owns %d shards (%v)", victim, n, err)
		}
		return nil
	})
	testwait.ForErr(t, convergeTimout, "calls under way", held)
	if _, err := admin.UndrainNode(ctx, victim); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, victim+" owning shards again", func() error {
		if n, err := ownedBy(c, victim); err != nil || n == 0 {
			return fmt.Errorf("%s owns %d shards (%v)", victim, n, err)
		}
		return nil
	})
	testwait.ForErr(t, convergeTimout, "calls under way", held)
	m, _, err := shardMap(c.Procs[0])
	if err != nil {
		t.Fatal(err)
	}
	shard, to := -1, ""
	for id, s := range m {
		if s.Owner != victim {
			shard, to = id, victim
			break
		}
	}
	if _, err := admin.MoveShard(ctx, shard, to); err != nil {
		t.Fatalf("move shard %d to %s: %v", shard, to, err)
	}

	// Close a shard whose task is held at the destination, at its epoch.
	var closed string
	testwait.ForErr(t, convergeTimout, "a call under way to close the shard of", func() error {
		m, _, err := shardMap(c.Procs[0])
		if err != nil {
			return err
		}
		held := dest.HeldAt(time.Now())
		for _, a := range l.Accepted() {
			if !held[a.ID] {
				continue
			}
			s := m[a.Shard]
			got, err := admin.CloseShard(ctx, a.Shard, &s.Epoch)
			if err != nil {
				return fmt.Errorf("close shard %d at epoch %d: %w", a.Shard, s.Epoch, err)
			}
			closed = fmt.Sprintf("shard %d (%s at epoch %d, task %s held) → %s at epoch %d", a.Shard, s.Owner, s.Epoch, a.ID, got.Owner, got.Epoch)
			return nil
		}
		return fmt.Errorf("no call held at the destination")
	})
	testwait.ForErr(t, convergeTimout, "calls under way", held)
	res, err := admin.TransferLeader(ctx, "")
	if err != nil {
		t.Fatalf("transfer-leader: %v", err)
	}
	rep := l.Check(t, 2*convergeTimout)
	t.Logf("drain, undrain and a move of %s, a close of %s, a leadership transfer %+v, under tasks: %v; submits %v", victim, closed, res, rep, l.Stats())
	if rep.Duplicates != 0 {
		t.Errorf("%d duplicate deliveries from planned moves, e.g. %v", rep.Duplicates, first(rep.DupTasks, 10))
	}
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}

// ownedBy counts the shards the committed map (as c's first live node
// sees it) gives node.
func ownedBy(c *Cluster, node string) (int, error) {
	m, _, err := shardMap(c.Live()[0])
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range m {
		if s.Owner == node {
			n++
		}
	}
	return n, nil
}
