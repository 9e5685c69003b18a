package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
)

// TestPostgresUnreachableFromOneNode cuts one node off from the database
// alone: it still reaches its peers (gossip, Raft) and the destination, so
// nothing in the cluster's membership says it cannot work. Its shards'
// tasks must not wait for the database to come back to it: its shards move
// to the others, which reach the database and deliver every accepted task
// while the node is still cut off. Once it has flagged itself (members
// show it) it answers a submit with a 503 at once, and should make no call
// (the next owner would make it again). After the heal it works again. On the
// code before (no node/pghealth.go) 111 of 456 tasks, all of the cut
// node's shards, were still undelivered 45 s after the cut. Run for a cut
// follower, and for a cut leader, which hands its leadership to a node
// that reaches the database so that one moves its shards.
func TestPostgresUnreachableFromOneNode(t *testing.T) {
	if why := netnsAvailable(); why != "" {
		t.Skip(why)
	}
	t.Run("follower", func(t *testing.T) { testPostgresUnreachableFromOneNode(t, false) })
	t.Run("leader", func(t *testing.T) { testPostgresUnreachableFromOneNode(t, true) })
}

func testPostgresUnreachableFromOneNode(t *testing.T, cutLeader bool) {
	lab := newNetLab(t, 3)
	destAddr := lab.addDestination()
	dbAddr := lab.addDestinationAddr(253)
	db := pgServerWith(t, pgtest.Options{Durable: true, Listen: []string{dbAddr}, TrustFrom: []string{lab.destNet()}})
	opts := withOptions(ClusterOptions{Hosts: lab.hosts(), Netns: lab.nodes}, pgOptions(db.URLAt(dbAddr, "postgres")))
	c := newTaskCluster(t, 3, opts)
	requireClusterAPI(t, c.Procs[0])
	dest := NewDestAt(t, destAddr)
	putEndpoint(t, c, "ep-far", dest.NexusURL())
	l := NewTaskLoad(c, "dbcut", func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(fmt.Sprintf("ns-%d", i%12), fmt.Sprintf("wf-%d", i), "ep-far", i), dest
	})
	nodeOf := lab.callers(c)
	if k := l.SubmitBatch(150); k != 150 {
		t.Fatalf("%d of 150 accepted: %v", k, l.Stats().LastErr)
	}
	leader := c.WaitForLeader(t, leaderTimeout)
	vi := -1
	for i, p := range c.Procs {
		if (p == leader) == cutLeader {
			vi = i
			break
		}
	}
	victim := c.Procs[vi]
	m, _, err := shardMap(leader)
	if err != nil {
		t.Fatal(err)
	}
	owned := map[int]uint64{}
	for s, a := range m {
		if a.Owner == victim.Name() {
			owned[s] = a.Epoch
		}
	}
	if len(owned) == 0 {
		t.Fatalf("%s owns no shard: %v", victim.Name(), m)
	}
	l.Run(0, 2, 20*time.Millisecond)
	defer l.Stop()
	testwait.ForErr(t, convergeTimout, "every node calling", func() error {
		per := callsPerNode(dest.Calls(), nodeOf, time.Time{})
		for _, p := range c.Procs {
			if per[p.Name()] == 0 {
				return fmt.Errorf("calls per node %v", per)
			}
		}
		return nil
	})

	cutAt := time.Now()
	lab.cutEgress(vi, dbAddr)
	since := func(ts time.Time) string { return fmt.Sprintf("%+.1fs", ts.Sub(cutAt).Seconds()) }
	testwait.ForErr(t, convergeTimout, victim.Name()+" saying its task store is unreachable", func() error {
		r, err := victim.Client().Ready(t.Context())
		if err != nil || r.Ready || r.Detail["task_store_error"] == nil {
			return fmt.Errorf("readyz %+v %v", r, err)
		}
		return nil
	})
	var flaggedAt time.Time
	testwait.ForErr(t, convergeTimout, victim.Name()+" flagging its task store unreachable", func() error {
		ms, err := victim.Client().Members(t.Context())
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.ID == victim.Name() && m.TaskStoreUnreachable {
				flaggedAt = time.Now()
				return nil
			}
		}
		return fmt.Errorf("not yet: %+v", ms)
	})
	// Knowing it, the node refuses a submit at once (503, retry
	// elsewhere); it used to hold it until the client gave up (5 s here).
	// Asked as soon as the node shows its own flag: the refusal must not
	// wait for gossip to have carried the flag (UpdateMeta's wait), by
	// when the leader may already have moved the shards.
	t0 := time.Now()
	_, serr := victim.Client().SubmitTask(t.Context(), nexusTask("ns-0", "wf-probe", "ep-far", 0))
	var ae *api.Error
	if !errors.As(serr, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "unreachable from this node") {
		t.Fatalf("a submit to %s, which shows its task store unreachable: %v after %v, want a 503 saying so", victim.Name(), serr, time.Since(t0))
	}
	t.Logf("a submit to %s once flagged: 503 after %v", victim.Name(), time.Since(t0).Round(time.Millisecond))
	movedAt := waitShardsMoved(t, c, map[string]bool{victim.Name(): true}, owned, victim.Name())
	ms, err := c.Procs[(vi+1)%3].Client().Members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if want := m.ID == victim.Name(); m.TaskStoreUnreachable != want {
			t.Errorf("members: %s task_store_unreachable %v, want %v", m.ID, m.TaskStoreUnreachable, want)
		}
	}
	atCut := len(l.Accepted())
	testwait.ForErr(t, convergeTimout, "300 tasks accepted after the cut", func() error {
		if k := len(l.Accepted()) - atCut; k < 300 {
			return fmt.Errorf("%d so far (%v)", k, l.Stats())
		}
		return nil
	})
	l.Stop()
	acc := l.Accepted()
	var doneAt time.Time
	testwait.ForErr(t, convergeTimout, fmt.Sprintf("all %d accepted tasks delivered with %s cut off from the database", len(acc), victim.Name()), func() error {
		got := dest.Deliveries()
		missing := map[int]int{}
		for _, a := range acc {
			if got[a.ID] == 0 {
				missing[a.Shard]++
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not delivered yet, per shard: %v (%s's shards: %v)", missing, victim.Name(), owned)
		}
		doneAt = time.Now()
		return nil
	})
	shardOf := map[string]int{}
	for _, a := range acc {
		shardOf[a.ID] = a.Shard
	}
	var lastCall time.Time // the cut node's last call
	var late []string
	for _, call := range dest.Calls() {
		if call.From != lab.DestSource(vi) {
			continue
		}
		if call.Arrived.After(lastCall) {
			lastCall = call.Arrived
		}
		if call.Arrived.After(flaggedAt) {
			var all []string
			for _, c2 := range dest.Calls() {
				if c2.RequestID == call.RequestID {
					all = append(all, fmt.Sprintf("%s %s %s %d", nodeOf[c2.From], since(c2.Arrived), c2.Path, c2.Status))
				}
			}
			_, mine := owned[shardOf[call.RequestID]]
			late = append(late, fmt.Sprintf("%s (shard %d, the cut node's: %v; its calls %v) at %s", call.RequestID, shardOf[call.RequestID], mine, all, since(call.Arrived)))
		}
	}
	if len(late) > 0 {
		// A call admitted before a read that the database never answered
		// waited for the shard's lock until the read's 5 s timeout, then
		// went out after the shard had moved (in about one run in twenty;
		// queue/DESIGN.md, "Readers"): the next owner had made it already.
		t.Errorf("%s called the destination after it said it could not reach the database (%s): %v",
			victim.Name(), since(flaggedAt), first(late, 10))
	}
	// The calls the cut node answered after the cut, whose results it
	// could not write: it hands them to the leader with its shards, which
	// writes them before the move (node/handover.go), so the next owner
	// does not make them again. Before, every one was made again.
	answered, again := 0, 0
	calls := dest.Calls()
	for _, call := range calls {
		if call.From != lab.DestSource(vi) || !call.Delivered() || call.Arrived.Before(cutAt) {
			continue
		}
		answered++
		for _, c2 := range calls {
			if c2.RequestID == call.RequestID && c2.From != call.From && c2.Arrived.After(call.Arrived) {
				again++
				break
			}
		}
	}
	t.Logf("%s answered %d calls after the cut; %d of them made again by another node", victim.Name(), answered, again)
	if again > 0 { // on the code before the relay: 25 of 25 in one run
		t.Errorf("%d of the %d calls %s answered after the cut were made again: its results were not handed over", again, answered, victim.Name())
	}
	ld, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s flagged at or before %s; its last call at %s", victim.Name(), since(flaggedAt), since(lastCall))
	t.Logf("%s (leader: %v) cut from the database at 0; its %d shards moved by %s; every accepted task delivered at %s; leader now %s; calls per node since the cut %v",
		victim.Name(), victim == leader, len(owned), since(movedAt), since(doneAt), ld.Name(), callsPerNode(dest.Calls(), nodeOf, cutAt))

	// The way back: it reaches the database again and takes shards again.
	healAt := time.Now()
	lab.restoreEgress(vi, dbAddr)
	testwait.ForErr(t, convergeTimout, victim.Name()+" ready again", func() error {
		if r, err := victim.Client().Ready(t.Context()); err != nil || !r.Ready {
			return fmt.Errorf("readyz %+v %v", r, err)
		}
		return nil
	})
	l2 := NewTaskLoad(c, "dbback", func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(fmt.Sprintf("ns-%d", i%12), fmt.Sprintf("wf-b%d", i), "ep-far", i), dest
	})
	testwait.ForErr(t, convergeTimout, victim.Name()+" calling again", func() error {
		if k := l2.SubmitBatch(60); k != 60 {
			return fmt.Errorf("%d of 60 accepted: %v", k, l2.Stats().LastErr)
		}
		if n := callsPerNode(dest.Calls(), nodeOf, healAt)[victim.Name()]; n == 0 {
			return fmt.Errorf("no call from %s yet", victim.Name())
		}
		return nil
	})
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}
