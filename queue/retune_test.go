package queue_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

// countingLimits is a LimitsSource over queuetest.Limits that counts the
// fleet-budget lookups (FleetLimits.FleetRPS) per destination: the lookup
// retune made for every group every 100 ms.
type countingLimits struct {
	*queuetest.Limits
	mu      sync.Mutex
	lookups map[string]int
}

// countingLimits' snapshots: the underlying one with FleetRPS counted.
type countedSnapshot struct {
	queue.Limits
	c *countingLimits
}

func (c *countingLimits) Current() queue.Limits {
	return countedSnapshot{Limits: c.Limits.Current(), c: c}
}

func (c *countingLimits) count(dest string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookups[dest]
}

func (s countedSnapshot) FleetRPS(ns, dest string) float64 {
	s.c.mu.Lock()
	s.c.lookups[dest]++
	s.c.mu.Unlock()
	return s.Limits.(queue.FleetLimits).FleetRPS(ns, dest)
}

func (s countedSnapshot) RampStartRPS(ns, dest string) float64 {
	return s.Limits.(queue.RampLimits).RampStartRPS(ns, dest)
}

func (s countedSnapshot) RampDuration(ns, dest string) time.Duration {
	return s.Limits.(queue.RampLimits).RampDuration(ns, dest)
}

// Idle groups (no budget, no ramp: every key of a tenant that sent one
// task, kept GroupIdleTTL) are not visited by the ramp loop: their rates
// change only with the config. The ramping and the budgeted groups still
// are, every tick, and a config change that gives an idle key a budget
// adds it to the walk (and a share change then reaches it); the GC drops
// it again.
func TestRetuneVisitsOnlyGroupsThatNeedIt(t *testing.T) {
	const idle = 40
	lim := queuetest.DefaultLimits()
	e := newEnv(t, 2, lim)
	budget := lim
	budget.FleetRPS = 40
	e.limits.SetDestination("budget", budget)
	ramp := lim
	ramp.RampStartRPS, ramp.RampDuration = 5, time.Hour
	e.limits.SetDestination("ramp", ramp)
	counted := &countingLimits{Limits: e.limits, lookups: map[string]int{}}

	var tasks []queue.Task
	for i := range idle {
		tasks = append(tasks, callbacks(1, 2, fmt.Sprint("idle", i), fmt.Sprint("idle-", i))...)
	}
	tasks = append(tasks, callbacks(1, 2, "b", "budget")...)
	tasks = append(tasks, callbacks(1, 2, "r", "ramp")...)
	e.add(t, tasks...)
	d := e.deps("a", newFakeExec(false))
	d.Limits = counted
	share := &settableShare{s: 0.5}
	d.Fleet = share
	cfg := fastCfg()
	cfg.GroupIdleTTL = time.Hour
	q := launch(t, cfg, d)
	testwait.For(t, 10*time.Second, "every task delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if q.GroupCount() != idle+2 || q.FleetIdle() {
		t.Fatalf("%d groups, fleet idle %v; want %d and a budgeted group", q.GroupCount(), q.FleetIdle(), idle+2)
	}
	q.KeyClosed(key("ramp")) // a ramp under way for an hour

	before := make(map[string]int, idle)
	for i := range idle {
		before[fmt.Sprint("idle-", i)] = counted.count(fmt.Sprint("idle-", i))
	}
	budgetSeen := counted.count("budget")
	testwait.For(t, 10*time.Second, "ten retunes of the budgeted group", func() bool { return counted.count("budget") >= budgetSeen+10 })
	for dest, n := range before {
		if got := counted.count(dest); got != n {
			t.Fatalf("idle group %s looked up %d times during ten retunes; want none", dest, got-n)
		}
	}
	share.set(1)
	testwait.For(t, 5*time.Second, "the budgeted group's new share", func() bool { l, _, _ := q.GroupRate(key("budget")); return l == 40 })
	// The ramp's second stage (after 1 s) reaches its group's limiter.
	testwait.For(t, 5*time.Second, "the ramp's next stage", func() bool {
		l, b, _ := q.GroupRate(key("ramp"))
		return l > 5 && l < 100 && b == 1
	})

	// A config change gives an idle key a budget: it is retuned from then
	// on, so a share change reaches it.
	e.limits.SetDestination("idle-0", budget)
	if l, _, _ := q.GroupRate(key("idle-0")); l != 40 {
		t.Fatalf("idle-0 rate %v after its budget of 40 at share 1", l)
	}
	share.set(0.25)
	testwait.For(t, 5*time.Second, "idle-0 follows the share", func() bool { l, _, _ := q.GroupRate(key("idle-0")); return l == 10 })
	if got := len(q.FleetBacklogs()); got != 0 {
		t.Fatalf("%d backlogs reported with nothing queued", got)
	}
}

// The GC drops a budgeted group from the walk: with no budgeted group
// left, the fleet sampler may idle again.
func TestGCForgetsBudgetedGroup(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.FleetRPS = 40
	e := newEnv(t, 1, lim)
	tasks := callbacks(1, 1, "b", "budget")
	e.add(t, tasks...)
	cfg := fastCfg()
	cfg.GroupIdleTTL = 50 * time.Millisecond
	d := e.deps("a", newFakeExec(false))
	d.Fleet = &settableShare{s: 1}
	q := launch(t, cfg, d)
	testwait.For(t, 10*time.Second, "delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	testwait.For(t, 10*time.Second, "the group collected", func() bool { return q.GroupCount() == 0 })
	if !q.FleetIdle() {
		t.Fatal("fleet not idle with no group left")
	}
}

// BenchmarkRetune is one ramp-loop pass over a node with many idle groups
// (one per key, kept GroupIdleTTL) and one ramping group: every group
// walked with a limits lookup each (walk=every_group, the code before the
// thirty-seventh session) against only the groups that need it
// (walk=needed). A pass runs every 100 ms (rampTick).
func BenchmarkRetune(b *testing.B) {
	for _, n := range []int{1_000, 50_000} {
		lim := queuetest.DefaultLimits()
		e := newEnv(b, 1, lim)
		ramp := lim
		ramp.RampStartRPS, ramp.RampDuration = 5, time.Hour
		e.limits.SetDestination("ramp", ramp)
		q, err := queue.New(fastCfg(), e.deps("a", newFakeExec(false))) // not started: no loop retunes beside the benchmark
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]breakerpool.Key, n)
		for i := range keys {
			keys[i] = breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: fmt.Sprint("ns-", i), Destination: fmt.Sprint("http://h", i, ".test")}
		}
		q.CreateGroups(append(keys, key("ramp")))
		q.KeyClosed(key("ramp"))
		for _, walk := range []struct {
			name string
			fn   func(time.Time)
		}{{"every_group", q.RetuneEveryGroup}, {"needed", q.RetuneAt}} {
			b.Run(fmt.Sprintf("groups=%d/walk=%s", n, walk.name), func(b *testing.B) {
				for b.Loop() {
					walk.fn(time.Now())
				}
				if _, ok := q.Ramp(key("ramp")); !ok {
					b.Fatal("the ramp ended")
				}
			})
		}
		_ = q.Close()
	}
}
