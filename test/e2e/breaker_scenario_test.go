package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// clusterBreakers is GET /v1/breakers?scope=cluster on p, filtered to key.
func clusterBreakers(p *Process, key breakerpool.Key) ([]api.Breaker, []string, error) {
	var l api.BreakerList
	if err := p.Client().Do(context.Background(), http.MethodGet, "/v1/breakers", url.Values{"scope": {"cluster"}}, nil, &l); err != nil {
		return nil, nil, fmt.Errorf("%s: GET /v1/breakers?scope=cluster: %w", p.Name(), err)
	}
	var out []api.Breaker
	for _, b := range l.Breakers {
		if b.TaskGroup == key.TaskGroup && b.Namespace == key.NamespaceID && b.Destination == key.Destination {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, l.Unreachable, nil
}

// breakersEverywhere is key's breaker on every node of c, by node, or an
// error naming the breakers there are while a node has none.
func breakersEverywhere(c *Cluster, key breakerpool.Key) ([]api.Breaker, error) {
	bs, _, err := clusterBreakers(c.Procs[0], key)
	if err != nil {
		return nil, err
	}
	if len(bs) != len(c.Procs) {
		return nil, fmt.Errorf("breakers for %s: %s", key, breakerLine(bs))
	}
	return bs, nil
}

// breakersAllIn is a condition for testwait.ForErr: key's breaker on every
// node of c, each in state.
func breakersAllIn(c *Cluster, key breakerpool.Key, state string) func() error {
	return func() error {
		bs, err := breakersEverywhere(c, key)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if b.State != state {
				return fmt.Errorf("not all %s: %s", state, breakerLine(bs))
			}
		}
		return nil
	}
}

// breakerLine renders node:state/source per breaker.
func breakerLine(bs []api.Breaker) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("%s:%s/%s/%s", b.Node, b.State, b.Source, b.Mode))
	}
	return strings.Join(parts, " ")
}

// TestTasksDestinationDown is scenario 2: two destinations, tasks for both
// arriving all along; one answers 503 for a bounded window (breaker Timeout
// 1s for it through dynamic config). The calls that reach the dead one
// cluster-wide are far fewer than the tasks sent to it (breakers trip,
// peers learn by gossip and probe instead of calling); every healthy task
// succeeds while the other is still down; after recovery every pending task
// for it succeeds, every node's breaker closes, and nothing is dead-lettered.
// The breaker states seen through /v1/breakers?scope=cluster are logged.
func TestTasksDestinationDown(t *testing.T) {
	c := newTaskCluster(t, 3)
	dead, live := NewDest(t), NewDest(t)
	putEndpoint(t, c, "ep-dead", dead.NexusURL())
	putEndpoint(t, c, "ep-live", live.NexusURL())
	setConfig(t, c, keyBreaker, "ep-dead", `{"Timeout":"1s"}`)
	const ns = "ns-down"
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: ns, Destination: "ep-dead"}
	l := NewTaskLoad(c, "down", func(i int) (api.TaskSubmit, *Dest) {
		if i%2 == 0 {
			return nexusTask(ns, fmt.Sprintf("wf-%d", i), "ep-dead", i), dead
		}
		return nexusTask(ns, fmt.Sprintf("wf-%d", i), "ep-live", i), live
	})
	l.Run(0, 2, 40*time.Millisecond) // ≈50 tasks/s, half to each destination
	testwait.ForErr(t, convergeTimout, "40 tasks accepted and a breaker for ep-dead on every node", func() error {
		if s := l.Stats(); s.Accepted < 40 {
			return fmt.Errorf("%d accepted (last error %v)", s.Accepted, s.LastErr)
		}
		_, err := breakersEverywhere(c, key)
		return err
	})

	window := pick2(6*time.Second, 30*time.Second)
	downAt := time.Now()
	dead.SetMode(t, transporttest.ModeUnavailable)
	seenOpen := map[string]bool{}
	last := ""
	poll := time.NewTicker(250 * time.Millisecond)
	for time.Since(downAt) < window { // the fault's dwell; breaker states are sampled meanwhile
		bs, unreachable, err := clusterBreakers(c.Procs[0], key)
		if err != nil {
			t.Logf("breakers: %v", err)
		} else if line := breakerLine(bs); line != last {
			t.Logf("+%v breakers for %s: %s (unreachable %v)", time.Since(downAt).Round(time.Millisecond), key, line, unreachable)
			last = line
			for _, b := range bs {
				if b.State != "closed" {
					seenOpen[b.Node] = true
				}
			}
		}
		<-poll.C
	}
	poll.Stop()
	// Healthy throughput kept: every task for ep-live accepted so far
	// succeeds while ep-dead is still down.
	upAt := time.Now()
	liveDone := waitSucceeded(t, l, live, convergeTimout)
	t.Logf("while ep-dead was down: every one of %d ep-live tasks succeeded %v after the window", liveDone, time.Since(upAt).Round(time.Millisecond))
	upAt = time.Now()
	deadCalls := dead.CallsBetween(downAt, upAt)
	dead.SetMode(t, transporttest.ModeUp)
	l.Stop()

	deadTasks, liveTasks := 0, 0
	for _, a := range l.Accepted() {
		if a.At.After(downAt) && a.At.Before(upAt) {
			if a.Dest == dead {
				deadTasks++
			} else {
				liveTasks++
			}
		}
	}
	t.Logf("ep-dead down %v: %d tasks for it accepted meanwhile, %d calls reached it cluster-wide (%.2f calls/task); %d ep-live tasks accepted meanwhile; breaker not closed at some point on %v",
		upAt.Sub(downAt).Round(time.Millisecond), deadTasks, deadCalls, float64(deadCalls)/float64(max(deadTasks, 1)), liveTasks, sortedNames(seenOpen))
	if deadTasks == 0 || deadCalls*3 > deadTasks {
		t.Errorf("%d calls reached the dead destination for %d tasks sent to it: the breakers did not hold it off (want at most a third)", deadCalls, deadTasks)
	}
	for _, p := range c.Procs {
		if !seenOpen[p.Name()] {
			t.Errorf("%s's breaker for %s was never seen open or half-open while the destination was down", p.Name(), key)
		}
	}

	rep := l.Check(t, convergeTimout)
	t.Logf("recovery: every task terminal %v after ep-dead came back; %v", time.Since(upAt).Round(time.Millisecond), rep)
	testwait.ForErr(t, convergeTimout, "the breaker for "+key.String()+" closed on every node", func() error {
		bs, _, err := clusterBreakers(c.Procs[0], key)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if b.State != "closed" {
				return fmt.Errorf("not closed everywhere: %s", breakerLine(bs))
			}
		}
		t.Logf("breakers closed %v after recovery: %s", time.Since(upAt).Round(time.Millisecond), breakerLine(bs))
		return nil
	})
	for _, p := range c.Live() {
		d, err := p.Client().DLQ(context.Background(), "", 10)
		if err != nil {
			t.Fatalf("%s: GET /v1/dlq: %v", p.Name(), err)
		}
		if len(d.Tasks) > 0 {
			t.Errorf("%s: %d+ tasks dead-lettered, e.g. %s", p.Name(), len(d.Tasks), describeTask(d.Tasks[0]))
		}
	}
	if rep.Duplicates != 0 {
		t.Errorf("%d duplicate deliveries without an ownership change, tasks %v", rep.Duplicates, first(rep.DupTasks, 10))
	}
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}

// waitSucceeded waits until every task of l bound for d accepted so far
// has succeeded, and returns how many there were.
func waitSucceeded(t *testing.T, l *TaskLoad, d *Dest, timeout time.Duration) int {
	t.Helper()
	var ids []string
	for _, a := range l.Accepted() {
		if a.Dest == d {
			ids = append(ids, a.ID)
		}
	}
	testwait.ForErr(t, timeout, fmt.Sprintf("%d healthy tasks succeeded", len(ids)), func() error {
		p, err := l.pick()
		if err != nil {
			return err
		}
		all, err := listAllTasks(p, l.prefix)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if task := all[id]; task.Status != statusSucceeded {
				return fmt.Errorf("on %s: %s", p.Name(), describeTask(task))
			}
		}
		return nil
	})
	return len(ids)
}

func sortedNames(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
