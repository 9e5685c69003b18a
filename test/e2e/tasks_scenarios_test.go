package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
)

// chaosProfile reports whether the long profile is on (FUSEBOX_CHAOS=1):
// the task scenarios then run bigger streams and longer faults.
func chaosProfile() bool { return os.Getenv("FUSEBOX_CHAOS") == "1" }

// pick2 returns short in the short profile, long under FUSEBOX_CHAOS=1.
func pick2[T any](short, long T) T {
	if chaosProfile() {
		return long
	}
	return short
}

// putEndpoint registers a Nexus endpoint through c's first live node and
// waits until every live node has applied it (a submit through a node that
// lags would be refused: unknown endpoint).
func putEndpoint(t testing.TB, c *Cluster, name, url string) {
	t.Helper()
	p := c.Live()[0]
	if _, err := p.Client().PutEndpoint(context.Background(), api.Endpoint{Name: name, URL: url}); err != nil {
		t.Fatalf("PUT /v1/endpoints/%s via %s: %v", name, p.Name(), err)
	}
	testwait.ForErr(t, convergeTimout, "endpoint "+name+" on every live node", func() error {
		for _, q := range c.Live() {
			eps, err := q.Client().Endpoints(context.Background())
			if err != nil {
				return fmt.Errorf("%s: %w", q.Name(), err)
			}
			found := false
			for _, e := range eps {
				found = found || (e.Name == name && e.URL == url)
			}
			if !found {
				return fmt.Errorf("%s has no endpoint %s → %s yet", q.Name(), name, url)
			}
		}
		return nil
	})
}

// setConfig sets key for destination dest (all namespaces) through c's
// first live node and waits until every live node holds the same config.
func setConfig(t testing.TB, c *Cluster, key, dest, value string) {
	t.Helper()
	p := c.Live()[0]
	if _, err := p.Client().ConfigSet(context.Background(), key, api.ConfigWrite{Destination: dest, Value: []byte(value)}); err != nil {
		t.Fatalf("PUT /v1/config/%s destination=%s %s via %s: %v", key, dest, value, p.Name(), err)
	}
	testwait.ForErr(t, convergeTimout, key+" for "+dest+" on every live node", c.sameState)
}

// newTaskCluster starts n nodes and waits until they agree on a shard map
// with every shard owned, so tasks have somewhere to go.
func newTaskCluster(t *testing.T, n int, opts ...ClusterOptions) *Cluster {
	t.Helper()
	c := newTestCluster(t, n, opts...)
	c.WaitForLeader(t, leaderTimeout)
	testwait.ForErr(t, convergeTimout, "an agreed shard map with every shard owned", c.sameShardMap)
	return c
}

// ownersOfTasks counts accepted tasks per owner of their shard in m.
func ownersOfTasks(acc []AcceptedTask, m map[int]api.Shard) map[string]int {
	out := map[string]int{}
	for _, a := range acc {
		out[m[a.Shard].Owner]++
	}
	return out
}

// TestTasksSteadyLoad is scenario 1: a bounded stream of Nexus starts and
// callbacks, spread over namespaces and workflows so every node owns some,
// submitted round-robin through all three nodes. Every accepted task
// succeeds, each reached its destination (matched by request id = task id),
// and with no fault there is no duplicate delivery.
func TestTasksSteadyLoad(t *testing.T) {
	c := newTaskCluster(t, 3)
	dest := NewDest(t)
	putEndpoint(t, c, "ep-steady", dest.NexusURL())
	n := pick2(300, 3000)
	l := NewTaskLoad(c, "steady", func(i int) (api.TaskSubmit, *Dest) {
		ns, wf := fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("wf-%d", i)
		if i%2 == 0 {
			return nexusTask(ns, wf, "ep-steady", i), dest
		}
		return callbackTask(ns, wf, dest.CallbackURL(), i), dest
	})
	begin := time.Now()
	l.Run(n, 4, 40*time.Millisecond) // ≈100 tasks/s
	l.Wait()
	submitted := time.Since(begin)
	rep := l.Check(t, convergeTimout)
	t.Logf("steady load: %d tasks submitted in %v (%v); %v; all terminal %v after the first submit",
		n, submitted.Round(time.Millisecond), l.Stats(), rep, time.Since(begin).Round(time.Millisecond))

	m, _, err := shardMap(c.Procs[0])
	if err != nil {
		t.Fatal(err)
	}
	perOwner := ownersOfTasks(l.Accepted(), m)
	t.Logf("accepted tasks per shard owner: %v", perOwner)
	for _, p := range c.Procs {
		if perOwner[p.Name()] == 0 {
			t.Errorf("%s owns none of the tasks' shards: the stream did not exercise every node (%v)", p.Name(), perOwner)
		}
		t.Logf("%s", queueFigures(p))
	}
	if s := l.Stats(); rep.Accepted != n || s.NotAcked != 0 {
		t.Errorf("with every node up, %d of %d tasks accepted (%v, last error %v)", rep.Accepted, n, s, s.LastErr)
	}
	if rep.Duplicates != 0 {
		leader := "?"
		if l, err := c.Leader(); err == nil {
			leader = l.Name()
		}
		t.Errorf("%d duplicate deliveries without any fault (Raft leader %s; duplicated tasks per shard owner %v; accepted per owner %v), e.g. tasks %v",
			rep.Duplicates, leader, dupOwners(l.Accepted(), rep.DupTasks, m), perOwner, first(rep.DupTasks, 10))
	}
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}

// shardsWithBacklog returns the shards p owns (per its map) whose backlog
// is positive, with their epochs.
func shardsWithBacklog(p *Process, owner string) (map[int]uint64, error) {
	m, _, err := shardMap(p)
	if err != nil {
		return nil, err
	}
	out := map[int]uint64{}
	for id, s := range m {
		if s.Owner != owner {
			continue
		}
		d, err := p.Client().Shard(context.Background(), id)
		if err != nil {
			return nil, fmt.Errorf("%s: GET /v1/shards/%d: %w", p.Name(), id, err)
		}
		if d.Backlog != nil && *d.Backlog > 0 {
			out[id] = s.Epoch
		}
	}
	return out, nil
}

// waitMoved waits until every live node's map gives each shard of old
// (shard → epoch when it was victim's) to another, live owner at a higher
// epoch, and returns how long that took from since.
func waitMoved(t *testing.T, c *Cluster, victim string, old map[int]uint64, since time.Time) time.Duration {
	t.Helper()
	testwait.ForErr(t, convergeTimout, fmt.Sprintf("%s's shards %v re-owned at higher epochs on every live node", victim, sortedKeys(old)), func() error {
		for _, p := range c.Live() {
			m, _, err := shardMap(p)
			if err != nil {
				return err
			}
			for id, ep := range old {
				s := m[id]
				if s.Owner == "" || s.Owner == victim || s.Epoch <= ep {
					return fmt.Errorf("%s: shard %d is %q@%d (was %s@%d)", p.Name(), id, s.Owner, s.Epoch, victim, ep)
				}
			}
		}
		return nil
	})
	return time.Since(since)
}

// dupOwners counts the duplicated tasks per owner of their shard in m.
func dupOwners(acc []AcceptedTask, dups []string, m map[int]api.Shard) map[string]int {
	dup := map[string]bool{}
	for _, id := range dups {
		dup[id] = true
	}
	out := map[string]int{}
	for _, a := range acc {
		if dup[a.ID] {
			out[m[a.Shard].Owner]++
		}
	}
	return out
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
