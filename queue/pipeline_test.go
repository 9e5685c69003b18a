package queue_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

// A task the breaker rejects must not use a rate token: with one token that
// refills every 1000 s, rejected tasks leave it for the first admitted one.
func TestBreakerConsultedBeforeRateLimiter(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 0.001 // burst 1, next token in 1000 s
	e := newEnv(t, 1, lim)
	exec := newFakeExec(false)
	br := e.pool.Get(key("d"))
	br.OpenFor(time.Hour, breakerpool.SourceOperator)
	q := e.start(t, fastCfg(), exec, nil)

	blocked := callbacks(3, 1, "blocked", "d")
	tAdd := time.Now()
	e.add(t, blocked...)
	testwait.For(t, 10*time.Second, "blocked tasks rescheduled", func() bool { return e.allBlocked(blocked, 2) })
	tObs := time.Now()
	if n, _, _ := exec.stats(); n != 0 {
		t.Fatalf("executor ran %d times behind an open breaker", n)
	}
	for _, b := range blocked {
		got, _ := e.store.Task(b.ID)
		// One immediate resubmit, then the gentle backoff (3 s × [0.8,
		// 1.0)) or the breaker's remaining open time if later: here an
		// hour, so the BlockedBackoffMax cap; each later task one turn of
		// the key's rate (1000 s) after the one before (blockedTurn).
		if got.Status != queue.StatusPending || got.Attempts != 0 ||
			got.NextAttemptAt.Before(tAdd.Add(queue.BlockedBackoffMax)) ||
			got.NextAttemptAt.After(tObs.Add(queue.BlockedBackoffMax+time.Duration(len(blocked)-1)*1000*time.Second)) {
			t.Fatalf("blocked task %s: %+v (added %v, observed %v)", b.ID, got, tAdd, tObs)
		}
		if res := e.store.Results(b.ID); len(res) != 1 {
			t.Fatalf("task %s: %d result writes, want 1 (the first rejection is resubmitted in memory)", b.ID, len(res))
		}
	}
	if got := metric(t, e.reg, "fusebox_circuit_breaker_executable_blocked_total", nil); got < 6 {
		t.Fatalf("breaker blocked %v calls, want ≥ 6 (2 per task)", got)
	}
	if tok, ok := q.GroupTokens(key("d")); !ok || tok < 0.99 {
		t.Fatalf("rate tokens after rejections = %v, %v; want the untouched token", tok, ok)
	}

	br.ForceClosed(breakerpool.SourceOperator)
	fresh := callback("fresh", 0, "d", "http://127.0.0.1:9/cb")
	e.add(t, fresh)
	testwait.For(t, 10*time.Second, "the fresh task to use the unspent token", func() bool {
		got, _ := e.store.Task("fresh")
		return got.Status == queue.StatusSucceeded
	})
}

func TestConcurrencyLimitHonoured(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.Concurrency = 3
	e := newEnv(t, 2, lim)
	exec := newFakeExec(true)
	e.start(t, fastCfg(), exec, nil)
	tasks := callbacks(12, 2, "c", "slow")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "3 calls in flight", func() bool { _, in, _ := exec.stats(); return in == 3 })
	close(exec.release)
	testwait.For(t, 10*time.Second, "all delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if calls, _, peak := exec.stats(); peak != 3 || calls != 12 {
		t.Fatalf("peak concurrency %d, calls %d; want 3 and 12", peak, calls)
	}
}

func TestLiveLimitChanges(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.Concurrency = 1
	e := newEnv(t, 1, lim)
	exec := newFakeExec(true)
	e.start(t, fastCfg(), exec, nil)
	tasks := callbacks(10, 1, "live", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "1 call in flight", func() bool { _, in, _ := exec.stats(); return in == 1 })

	lim.Concurrency = 4
	e.limits.SetDestination("d", lim)
	testwait.For(t, 10*time.Second, "4 calls in flight after raising the limit", func() bool { _, in, _ := exec.stats(); return in == 4 })
	close(exec.release)
	testwait.For(t, 10*time.Second, "all delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if _, _, peak := exec.stats(); peak != 4 {
		t.Fatalf("peak %d, want 4", peak)
	}

	// Rate: a waiter for a token due in 1000 s is woken by a raised limit.
	lim.MaxTaskRPS = 0.001
	e.limits.SetDestination("d", lim)
	slow := callbacks(2, 1, "rate", "d")
	e.add(t, slow[0])
	testwait.For(t, 10*time.Second, "first task uses the burst", func() bool { return e.allStatus(slow[:1], queue.StatusSucceeded) })
	e.add(t, slow[1])
	testwait.For(t, 10*time.Second, "second task waiting for a token", func() bool {
		n, _, _ := exec.stats()
		return n == 11 && metric(t, e.reg, "fusebox_queue_scheduler_active_workers", nil) == 1
	})
	lim.MaxTaskRPS = 1000
	e.limits.SetDestination("d", lim)
	testwait.For(t, 10*time.Second, "second task after the raise", func() bool { return e.allStatus(slow, queue.StatusSucceeded) })
}

// Calls never outrun the token bucket: by the i-th call at time tᵢ, at most
// burst + rate·(tᵢ − t₀) calls were made.
func TestRateLimitHonouredOverWindow(t *testing.T) {
	const rps, n = 10, 30
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = rps
	e := newEnv(t, 3, lim)
	exec := newFakeExec(false)
	e.start(t, fastCfg(), exec, nil)
	tasks := callbacks(n, 3, "r", "d")
	e.add(t, tasks...)
	testwait.For(t, 20*time.Second, "all delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	times := exec.callTimes()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for i, at := range times {
		allowed := float64(rps) + rps*at.Sub(times[0]).Seconds() + 1 // +1: the limiter's clock starts a hair earlier
		if float64(i+1) > allowed {
			t.Fatalf("call %d at +%v exceeds the bucket (%v allowed)", i+1, at.Sub(times[0]), allowed)
		}
	}
	if span := times[n-1].Sub(times[0]); span < time.Duration(float64(n-rps-1)/rps*float64(time.Second)) {
		t.Fatalf("%d calls in %v: faster than %d RPS after the burst", n, span, rps)
	}
	if metric(t, e.reg, "fusebox_queue_rate_limiter_wait_seconds", nil) != n {
		t.Fatalf("rate wait histogram has %v samples, want %d", metric(t, e.reg, "fusebox_queue_rate_limiter_wait_seconds", nil), n)
	}
}

func TestBufferFullRejectsAndRetries(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.BufferSize, lim.Concurrency = 2, 1
	e := newEnv(t, 1, lim)
	exec := newFakeExec(true)
	e.start(t, fastCfg(), exec, nil)
	tasks := callbacks(8, 1, "buf", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "buffer-full rejections", func() bool {
		return metric(t, e.reg, "fusebox_queue_scheduler_rejections_total", map[string]string{"reason": "buffer_full"}) > 0
	})
	if b := metric(t, e.reg, "fusebox_queue_scheduler_buffered", nil); b > 2 {
		t.Fatalf("buffered %v > buffer size 2", b)
	}
	close(exec.release)
	testwait.For(t, 10*time.Second, "all delivered after retries", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	for _, tk := range tasks {
		if got, _ := e.store.Task(tk.ID); got.Attempts != 1 {
			t.Fatalf("task %s attempts %d, want 1 (a rejection is not an attempt)", tk.ID, got.Attempts)
		}
	}
}

// startHolding starts a queue of one shard whose group takes 2 tasks and
// calls one at a time, with calls held until exec.release is closed and
// RejectRetry an hour (only a room signal offers a held task again), adds n
// callbacks of one key, and waits until a full buffer has made the shard
// hold some.
func startHolding(t *testing.T, n int, prefix string) (*env, *fakeExec, *queue.Queue, []queue.Task) {
	t.Helper()
	lim := queuetest.DefaultLimits()
	lim.BufferSize, lim.Concurrency = 2, 1
	e := newEnv(t, 1, lim)
	exec := newFakeExec(true)
	cfg := fastCfg()
	cfg.RejectRetry = time.Hour
	q := e.start(t, cfg, exec, nil)
	tasks := callbacks(n, 1, prefix, "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "refused tasks held", func() bool {
		st, _ := q.ShardState(0)
		return st.Held > 0
	})
	return e, exec, q, tasks
}

// Held tasks are offered again a key at a time: a room signal offers a key's
// held tasks in order until its buffer refuses one, and the rest wait for the
// next signal unoffered. Offering every held task on every signal made the
// offers grow with the square of the backlog (439 for these 40 tasks,
// against 60 now). Each task is counted as refused once, when it is first
// held, and the tasks reach the destination in the order they were read.
func TestHeldTasksAreOfferedAKeyAtATime(t *testing.T) {
	const n = 40
	e, exec, q, tasks := startHolding(t, n, "key")
	close(exec.release)
	testwait.For(t, 10*time.Second, "all delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	st, _ := q.ShardState(0)
	if st.Offers > 3*n {
		t.Fatalf("%d offers for %d tasks: held tasks were offered again one by one after their buffer refused one", st.Offers, n)
	}
	if r := metric(t, e.reg, "fusebox_queue_scheduler_rejections_total", map[string]string{"reason": "buffer_full"}); r < 1 || r > n {
		t.Fatalf("%v buffer_full refusals counted for %d tasks, want each held task once", r, n)
	}
	exec.mu.Lock()
	defer exec.mu.Unlock()
	for i, c := range exec.calls {
		if want := tasks[i].ID; c.req.RequestID != want {
			t.Fatalf("call %d was %s, want %s: held tasks left their order", i, c.req.RequestID, want)
		}
	}
}

// A task a full buffer refuses is held in memory and offered again when the
// group has drained to half: it is not read from the store again, and the
// room signal alone (RejectRetry is an hour here) brings it to a worker.
func TestBufferFullHoldsRefusedTasksUntilRoom(t *testing.T) {
	e, exec, q, tasks := startHolding(t, 8, "hold")
	if st, _ := q.ShardState(0); st.InFlight != len(tasks) {
		t.Fatalf("in flight %d, want all %d (held tasks stay in flight)", st.InFlight, len(tasks))
	}
	close(exec.release)
	testwait.For(t, 10*time.Second, "all delivered through room signals", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if n := e.store.Loaded(); n != len(tasks) {
		t.Fatalf("the store handed out %d tasks for %d: a refused task was read again", n, len(tasks))
	}
	if st, _ := q.ShardState(0); st.Held != 0 {
		t.Fatalf("%d tasks still held after all succeeded", st.Held)
	}
}

func TestBatchSizeZeroStopsReading(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.BatchSize = 0
	e := newEnv(t, 1, lim)
	exec := newFakeExec(false)
	q := e.start(t, fastCfg(), exec, nil)
	testwait.For(t, 10*time.Second, "reader paused", func() bool {
		return metric(t, e.reg, "fusebox_queue_readers_paused", nil) == 1
	})
	before, _ := q.ShardState(0)
	tasks := callbacks(5, 1, "z", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "reader woken by the store", func() bool {
		st, _ := q.ShardState(0)
		return st.Wakeups > before.Wakeups
	})
	if st, _ := q.ShardState(0); st.Reads != before.Reads {
		t.Fatalf("reader loaded tasks with batch size 0 (%d → %d reads)", before.Reads, st.Reads)
	}
	if n, _, _ := exec.stats(); n != 0 {
		t.Fatalf("%d calls with batch size 0", n)
	}
	e.limits.SetBatchSize(2) // smaller than the backlog: several reads
	testwait.For(t, 10*time.Second, "delivery after the batch size change", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if metric(t, e.reg, "fusebox_queue_readers_paused", nil) != 0 {
		t.Fatal("reader still reported paused")
	}
}

func TestIdleGroupsCollected(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	cfg := fastCfg()
	cfg.GroupIdleTTL, cfg.GCInterval = 30*time.Millisecond, 10*time.Millisecond
	q := e.start(t, cfg, newFakeExec(false), nil)
	tasks := append(callbacks(3, 1, "g1", "d1"), callbacks(3, 1, "g2", "d2")...)
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	testwait.For(t, 10*time.Second, "idle groups removed", func() bool { return q.GroupCount() == 0 })
}

// TestBlockedWaitsForTheBreakersProbe: a task an open breaker rejects is
// rescheduled for when the breaker admits its next probe (with up to 20 %
// spread) when that is later than the gentle backoff, so a dead
// destination's tasks are not rewritten every few seconds of its open
// period; once the breaker would probe sooner, the gentle backoff applies.
func TestBlockedWaitsForTheBreakersProbe(t *testing.T) {
	for _, tc := range []struct {
		name     string
		open     time.Duration
		min, max time.Duration // NextAttemptAt − now, bounds
	}{
		{"probe after the gentle backoff", 20 * time.Second, 20*time.Second - time.Second, 24 * time.Second},
		{"probe before the gentle backoff", time.Second, 2400 * time.Millisecond, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, queuetest.DefaultLimits())
			exec := newFakeExec(false)
			e.pool.Get(key("d")).OpenFor(tc.open, breakerpool.SourceOperator)
			e.start(t, fastCfg(), exec, nil)
			task := callback("blocked", 0, "d", "http://127.0.0.1:9/cb")
			tAdd := time.Now()
			e.add(t, task)
			testwait.For(t, 10*time.Second, "the task rescheduled", func() bool {
				got, _ := e.store.Task(task.ID)
				return got.Blocked == 2
			})
			tObs := time.Now()
			got, _ := e.store.Task(task.ID)
			if got.NextAttemptAt.Before(tAdd.Add(tc.min)) || got.NextAttemptAt.After(tObs.Add(tc.max)) {
				t.Fatalf("next attempt %v after the submit, want within [%v, %v]", got.NextAttemptAt.Sub(tAdd), tc.min, tc.max)
			}
			if n, _, _ := exec.stats(); n != 0 {
				t.Fatalf("executor ran %d times behind an open breaker", n)
			}
		})
	}
}

// TestBlockedTasksComeDueInTurns: the tasks an open breaker refuses come
// due one turn of their key's rate apart (on this node), each after its own
// delay (the breaker's probe, 20 s here, with up to 20 % spread), so a dead
// destination's backlog comes due no faster than the key could take it and
// is not all read, refused and rewritten once per open period. Without
// turns the 40 tasks all came due within the probe's 4 s spread; a key
// with no rate limit still does (TestBlockedWaitsForTheBreakersProbe).
func TestBlockedTasksComeDueInTurns(t *testing.T) {
	const n, rps = 40, 1 // turns of 1 s: the backlog spreads over 39 s
	const probe, spread = 20 * time.Second, 4 * time.Second
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = rps
	e := newEnv(t, 2, lim)
	exec := newFakeExec(false)
	e.pool.Get(key("d")).OpenFor(probe, breakerpool.SourceOperator)
	e.start(t, fastCfg(), exec, nil)
	tasks := callbacks(n, 2, "dead", "d")
	tAdd := time.Now()
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "every task rescheduled", func() bool { return e.allBlocked(tasks, 2) })
	due := make([]time.Time, 0, n)
	for _, tk := range tasks {
		got, _ := e.store.Task(tk.ID)
		if got.NextAttemptAt.Before(tAdd.Add(probe - time.Second)) {
			t.Fatalf("task %s due %v after the submit, before the breaker's probe (%v)", tk.ID, got.NextAttemptAt.Sub(tAdd), probe)
		}
		due = append(due, got.NextAttemptAt)
	}
	slices.SortFunc(due, time.Time.Compare)
	if span, want := due[n-1].Sub(due[0]), time.Duration(n-1)*time.Second/rps-spread; span < want {
		t.Fatalf("the %d refused tasks come due within %v, want them spread over at least %v (turns of %v, less the probe's spread)", n, span, want, time.Second/rps)
	}
	if calls, _, _ := exec.stats(); calls != 0 {
		t.Fatalf("executor ran %d times behind an open breaker", calls)
	}
}

// A dead destination's refused tasks take turns per destination, not per
// key: four namespaces' tasks for one host behind open breakers come due
// one turn of the key's rate (1000 s) apart across all of them. With a
// sequence per key each namespace's tasks took the same turns, and a host
// called from N namespaces was rewritten N times as fast.
func TestBlockedTurnsShareTheDestination(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 0.001 // a turn of 1000 s
	e := newEnv(t, 1, lim)
	var tasks []queue.Task
	for ns := range 4 {
		k := key("d")
		k.NamespaceID = fmt.Sprint("tenant-", ns)
		e.pool.Get(k).OpenFor(time.Hour, breakerpool.SourceOperator)
		for i := range 3 {
			tk := callback(fmt.Sprintf("blocked-%d-%d", ns, i), 0, "d", "http://127.0.0.1:9/cb")
			tk.NamespaceID = k.NamespaceID
			tasks = append(tasks, tk)
		}
	}
	e.start(t, fastCfg(), newFakeExec(false), nil)
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "blocked tasks rescheduled", func() bool { return e.allBlocked(tasks, 2) })
	var dues []time.Time
	for _, tk := range tasks {
		got, _ := e.store.Task(tk.ID)
		dues = append(dues, got.NextAttemptAt)
	}
	slices.SortFunc(dues, time.Time.Compare)
	for i := 1; i < len(dues); i++ {
		if gap := dues[i].Sub(dues[i-1]); gap < 999*time.Second {
			t.Fatalf("tasks %d and %d of one dead destination come due %v apart, want a turn (1000 s): %v", i-1, i, gap, dues)
		}
	}
}
