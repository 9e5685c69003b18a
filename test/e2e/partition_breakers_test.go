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
	const n = 3
	// Open long enough to last the partition: the breakers are open when
	// the node comes back, and only a probe after Timeout closes them.
	sc := newLabScenario(t, "heal", "ep-dies", `{"Timeout":"20s"}`, 40*time.Millisecond, nil)
	lab, c, dest, key, l := sc.lab, sc.c, sc.dest, sc.key, sc.l
	defer l.Stop()
	sc.waitBreakersEverywhere(t)

	leader := c.WaitForLeader(t, leaderTimeout)
	idx := 0
	for c.Procs[idx] == leader {
		idx++
	}
	cut := c.Procs[idx]
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
	t.Logf("majority open %v after the cut; the cut node's calls since the cut: %d", time.Since(cutAt).Round(time.Millisecond),
		callsPerNode(dest.Calls(), sc.nodeOf, cutAt)[cut.Name()])

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
	calls := callsPerNode(dest.Calls(), sc.nodeOf, healAt)[cut.Name()]
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

// labScenario is three nodes in a net lab (newNetLab, addDestination), one
// Nexus endpoint on a Dest at the lab's destination address with the given
// breaker settings, and a stream of starts over one namespace, so one
// breaker key on every node.
type labScenario struct {
	lab      *netLab
	destAddr string
	c        *Cluster
	dest     *Dest
	key      breakerpool.Key
	l        *TaskLoad
	nodeOf   map[string]string // a call's source address → its node
}

// newLabScenario starts it (or skips the test where namespaces are not
// available); configure, when set, runs before the load starts.
func newLabScenario(t *testing.T, name, ep, breaker string, interval time.Duration, configure func(*Cluster)) *labScenario {
	t.Helper()
	if why := netnsAvailable(); why != "" {
		t.Skip(why)
	}
	sc := &labScenario{lab: newNetLab(t, 3)}
	sc.destAddr = sc.lab.addDestination()
	sc.c = newTaskCluster(t, 3, ClusterOptions{Hosts: sc.lab.hosts(), Netns: sc.lab.nodes})
	requireClusterAPI(t, sc.c.Procs[0])
	sc.dest = NewDestAt(t, sc.destAddr)
	putEndpoint(t, sc.c, ep, sc.dest.NexusURL())
	setConfig(t, sc.c, keyBreaker, ep, breaker)
	if configure != nil {
		configure(sc.c)
	}
	ns := "ns-" + name
	sc.key = breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: ns, Destination: ep}
	sc.l = NewTaskLoad(sc.c, name, func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(ns, fmt.Sprintf("wf-%d", i), ep, i), sc.dest
	})
	sc.nodeOf = sc.lab.callers(sc.c)
	sc.l.Run(0, 2, interval)
	return sc
}

// waitBreakersEverywhere waits until every node has a breaker for the key.
func (sc *labScenario) waitBreakersEverywhere(t *testing.T) {
	t.Helper()
	testwait.ForErr(t, convergeTimout, "a breaker for "+sc.key.String()+" on every node", func() error {
		_, err := breakersEverywhere(sc.c, sc.key)
		return err
	})
}
