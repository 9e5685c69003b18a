package queue_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

// settableShare is a queue.FleetShare whose share a test sets: the part of
// the fleet the node/ implementation computes from gossiped backlogs.
type settableShare struct {
	mu sync.Mutex
	s  float64
}

func (f *settableShare) set(s float64) { f.mu.Lock(); f.s = s; f.mu.Unlock() }
func (f *settableShare) Share(breakerpool.Key) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s
}

func (e *env) startFleet(t *testing.T, exec queue.Executor, fleet queue.FleetShare) *queue.Queue {
	t.Helper()
	d := e.deps("a", exec)
	d.Fleet = fleet
	return launch(t, fastCfg(), d)
}

// maxPerWindow is the most calls in any window of length w.
func maxPerWindow(times []time.Time, w time.Duration) int {
	best := 0
	for i := range times {
		n := 0
		for _, at := range times[i:] {
			if at.Sub(times[i]) < w {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// Issue 19 §3: a key with a fleet budget runs at this node's share of it
// (below its per-host rate), with a burst of 20 ms; a new
// share reaches the limiter at the next retune; the backlog is reported
// for the gossip.
func TestFleetBudgetShare(t *testing.T) {
	const n = 30
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 100
	lim.FleetRPS = 40
	e := newEnv(t, 1, lim)
	tasks := callbacks(n, 1, "fb", "dest")
	exec := newFakeExec(false)
	share := &settableShare{s: 0.25} // 10 calls/s
	q := e.startFleet(t, exec, share)
	e.add(t, tasks...)
	testwait.For(t, 5*time.Second, "the group", func() bool { _, _, ok := q.GroupRate(key("dest")); return ok })
	if l, b, _ := q.GroupRate(key("dest")); l != 10 || b != 1 {
		t.Fatalf("rate %v burst %v, want the share 0.25 × 40 = 10, burst 1", l, b)
	}
	st, ok := q.Fleet(key("dest"))
	if !ok || st.BudgetRPS != 40 || st.Share != 0.25 || st.RPS != 10 {
		t.Fatalf("Fleet = %+v, %v", st, ok)
	}
	testwait.For(t, 5*time.Second, "a backlog reported", func() bool {
		for _, b := range q.FleetBacklogs() {
			if b.Key == key("dest") && b.Backlog > 0 {
				return true
			}
		}
		return false
	})
	testwait.For(t, 10*time.Second, "a third of the tasks delivered", func() bool { c, _, _ := exec.stats(); return c >= n/3 })
	if got := maxPerWindow(exec.callTimes(), time.Second); got > 10+1 {
		t.Fatalf("%d calls in one second at a share of 10/s (burst 1)", got)
	}

	share.set(1) // the others left the key's set: the whole budget, under the per-host 100
	testwait.For(t, 5*time.Second, "the new share applied", func() bool {
		l, b, _ := q.GroupRate(key("dest"))
		return l == 40 && b == 1
	})
	testwait.For(t, 10*time.Second, "delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if got := maxPerWindow(exec.callTimes(), time.Second); got > 40+1 {
		t.Fatalf("%d calls in one second at the whole budget 40/s (burst 1)", got)
	}
	if bl := q.FleetBacklogs(); len(bl) != 0 {
		t.Fatalf("backlog %+v after everything was delivered", bl)
	}
}

// The per-host rate still caps a node's share, a key without a budget
// keeps its configured rate, and a share of 0 admits nothing.
func TestFleetBudgetCapsAndOff(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 20
	e := newEnv(t, 1, lim)
	withBudget := lim
	withBudget.FleetRPS = 1000
	e.limits.SetDestination("budget", withBudget)
	share := &settableShare{s: 0.5}
	q := e.startFleet(t, newFakeExec(false), share)
	e.add(t, callbacks(1, 1, "a", "budget")...)
	e.add(t, callbacks(1, 1, "b", "plain")...)
	testwait.For(t, 5*time.Second, "both groups", func() bool {
		_, _, a := q.GroupRate(key("budget"))
		_, _, b := q.GroupRate(key("plain"))
		return a && b
	})
	if l, _, _ := q.GroupRate(key("budget")); l != 20 {
		t.Fatalf("budget share 500/s capped by the per-host 20: got %v", l)
	}
	if l, b, _ := q.GroupRate(key("plain")); l != 20 || b != 20 {
		t.Fatalf("no budget: rate %v burst %v, want the configured 20, 20", l, b)
	}
	if _, ok := q.Fleet(key("plain")); ok {
		t.Fatal("Fleet reports a key without a budget")
	}
	share.set(0)
	testwait.For(t, 5*time.Second, "share 0 applied", func() bool { l, _, _ := q.GroupRate(key("budget")); return l == 0 })
	if st, _ := q.Fleet(key("budget")); st.RPS != 0 || math.IsNaN(st.Share) {
		t.Fatalf("Fleet at share 0 = %+v", st)
	}
}
