package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// TestOpenBreakerAcrossAHealedPartition: a destination dies while a node is
// cut off from its peers (not from the destination). The majority's
// breakers open and gossip among them; the cluster view of the breakers on
// a majority node lists the cut node as unreachable and answers with the
// others' breakers. After the heal the cut node ends up open too, learnt or
// tripped, having called the dead destination at most its own trip's worth
// of times; once the destination is back, every node closes and every task
// succeeds.
func TestOpenBreakerAcrossAHealedPartition(t *testing.T) {
	if why := netnsAvailable(); why != "" {
		t.Skip(why)
	}
	const n = 3
	lab := newNetLab(t, n)
	destAddr := lab.addDestination()
	c := newTaskCluster(t, n, ClusterOptions{Hosts: lab.hosts(), Netns: lab.nodes})
	requireClusterAPI(t, c.Procs[0])
	dest := NewDestAt(t, destAddr)
	putEndpoint(t, c, "ep-dies", dest.NexusURL())
	// Open long enough to last the partition: the breakers are open when
	// the node comes back, and only a probe after Timeout closes them.
	setConfig(t, c, keyBreaker, "ep-dies", `{"Timeout":"20s"}`)
	const ns = "ns-heal"
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: ns, Destination: "ep-dies"}
	l := NewTaskLoad(c, "heal", func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(ns, fmt.Sprintf("wf-%d", i), "ep-dies", i), dest
	})
	l.Run(0, 2, 40*time.Millisecond)
	defer l.Stop()
	testwait.ForErr(t, convergeTimout, "a breaker for "+key.String()+" on every node", func() error {
		_, err := breakersEverywhere(c, key)
		return err
	})

	leader := c.WaitForLeader(t, leaderTimeout)
	idx := 0
	for c.Procs[idx] == leader {
		idx++
	}
	cut := c.Procs[idx]
	src := lab.DestSource(idx)
	lab.cut(idx)
	cut.SetIsolated(true)
	cutAt := time.Now()
	dest.SetMode(t, transporttest.ModeUnavailable)
	var viewer *Process
	for _, p := range c.Live() {
		viewer = p
		break
	}
	testwait.ForErr(t, convergeTimout, "the majority's breakers open, the cut node listed unreachable", func() error {
		bs, unreachable, err := clusterBreakers(viewer, key)
		if err != nil {
			return err
		}
		if len(unreachable) != 1 || unreachable[0] != cut.Name() {
			return fmt.Errorf("unreachable %v, want [%s]; breakers %s", unreachable, cut.Name(), breakerLine(bs))
		}
		open := 0
		for _, b := range bs {
			if b.Node == cut.Name() {
				return fmt.Errorf("the cut node's breaker is listed: %s", breakerLine(bs))
			}
			if b.State == "open" {
				open++
			}
		}
		if open != n-1 {
			return fmt.Errorf("%d of %d open: %s", open, n-1, breakerLine(bs))
		}
		return nil
	})
	callsAt := func(from string, since time.Time) int {
		k := 0
		for _, call := range dest.Calls() {
			if call.From == from && call.Arrived.After(since) {
				k++
			}
		}
		return k
	}
	t.Logf("majority open %v after the cut; the cut node's calls since the cut: %d", time.Since(cutAt).Round(time.Millisecond), callsAt(src, cutAt))

	healAt := time.Now()
	lab.heal(idx)
	cut.SetIsolated(false)
	var openedBy string
	testwait.ForErr(t, convergeTimout, cut.Name()+"'s breaker open after the heal", func() error {
		bs, err := cut.Client().Breakers(context.Background(), false)
		if err != nil {
			return err
		}
		for _, b := range bs.Breakers {
			if b.TaskGroup == key.TaskGroup && b.Namespace == key.NamespaceID && b.Destination == key.Destination {
				if b.State != "open" {
					return fmt.Errorf("%s/%s", b.State, b.Source)
				}
				openedBy = b.Source
				return nil
			}
		}
		return fmt.Errorf("no breaker for %s", key)
	})
	calls := callsAt(src, healAt)
	t.Logf("%s open %v after the heal (source %s), after %d calls of its own to the dead destination",
		cut.Name(), time.Since(healAt).Round(time.Millisecond), openedBy, calls)
	// Its own breaker trips after breakerpool.DefaultFailureThreshold
	// failures in a row; a hint can only save it calls.
	if calls > breakerpool.DefaultFailureThreshold {
		t.Errorf("%s called the dead destination %d times after the heal, more than its own breaker allows", cut.Name(), calls)
	}

	dest.SetMode(t, transporttest.ModeUp)
	l.Stop()
	rep := l.Check(t, convergeTimout)
	testwait.ForErr(t, convergeTimout, "the breaker for "+key.String()+" closed on every node", breakersAllIn(c, key, "closed"))
	t.Logf("after the destination came back: %v", rep)
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}
