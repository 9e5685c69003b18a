package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/shardmap"
)

func TestStoreRefusesStaleEpoch(t *testing.T) {
	e := newEnv(t, 2, queuetest.DefaultLimits())
	e.add(t, callback("x", 1, "d", "http://127.0.0.1:9/cb"))
	err := e.store.Complete(context.Background(), 1, 7, []queue.Result{{TaskID: "x", Status: queue.StatusSucceeded}})
	var wrong *shardmap.WrongOwnerError
	if !errors.As(err, &wrong) || !errors.Is(err, shardmap.ErrWrongOwner) || wrong.Owner != "a" || wrong.Epoch != 1 {
		t.Fatalf("stale epoch: %v", err)
	}
	if got, _ := e.store.Task("x"); got.Status != queue.StatusPending {
		t.Fatalf("refused write applied: %+v", got)
	}
}

// A shard moves while its calls are in flight: the old owner cancels them
// and counts possible duplicates; the new owner continues from the
// replicated state and every task ends exactly once.
func TestShardMoveHandsOverWork(t *testing.T) {
	e := newEnv(t, 2, queuetest.DefaultLimits())
	execA, execB := newFakeExec(true), newFakeExec(false)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	qa := e.startNode(t, "a", fastCfg(), execA, nil, regA)
	e.startNode(t, "b", fastCfg(), execB, nil, regB)
	tasks := callbacks(6, 2, "move", "d") // shards 0 and 1
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "a calling all six", func() bool { _, in, _ := execA.stats(); return in == 6 })

	m := singleOwnerMap(t, 2, "a", 1, 2)
	m.Shards[1].Owner, m.Shards[1].Epoch = "b", 2 // shard 1 moves to b
	if _, err := e.holder.Store(m); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "b delivers shard 1", func() bool {
		n, _, _ := execB.stats()
		return n == 3 && e.store.Count(queue.StatusSucceeded) == 3
	})
	if _, ok := qa.ShardState(1); ok {
		t.Fatal("a still works on shard 1")
	}
	if got := metric(t, regA, "fusebox_queue_abandoned_calls_total", map[string]string{"reason": "in_flight"}); got != 3 {
		t.Fatalf("a counted %v possible duplicates, want 3", got)
	}
	close(execA.release) // a's shard-0 calls finish
	testwait.For(t, 10*time.Second, "all delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	for _, tk := range tasks {
		res := e.store.Results(tk.ID)
		if len(res) != 1 || res[0].Attempts != 1 {
			t.Fatalf("task %s results %+v: want exactly one terminal result", tk.ID, res)
		}
	}
	if got := metric(t, regB, "fusebox_queue_owned_shards", nil); got != 1 {
		t.Fatalf("b owns %v shards, want 1", got)
	}
}

// A node whose view of the map lags behind the committed one has its
// results refused, and stops working on the shard at once.
func TestStaleOwnerStopsOnRefusedWrite(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	if _, err := e.holder.Store(singleOwnerMap(t, 1, "b", 2, 2)); err != nil { // committed: b owns shard 0
		t.Fatal(err)
	}
	stale := queuetest.NewOwnership(map[int]uint64{0: 1}) // a still believes it owns it
	exec := newFakeExec(false)
	reg := prometheus.NewRegistry()
	q, err := queue.New(fastCfg(), queue.Deps{Store: e.store, Ownership: stale, Limits: e.limits,
		Breakers: queue.PoolBreakers(e.pool), Executor: exec, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	defer q.Close()
	e.add(t, callback("late", 0, "d", "http://127.0.0.1:9/cb"))
	testwait.For(t, 10*time.Second, "the shard to stop after the refused write", func() bool {
		st, ok := q.ShardState(0)
		return ok && st.Lost && st.Stopped
	})
	if e.store.Refused() == 0 {
		t.Fatal("no write was refused")
	}
	if got, _ := e.store.Task("late"); got.Status != queue.StatusPending || got.Attempts != 0 {
		t.Fatalf("stale owner's result applied: %+v", got)
	}
	if got := metric(t, reg, "fusebox_queue_abandoned_calls_total", map[string]string{"reason": "unacked"}); got != 1 {
		t.Fatalf("unacked duplicates %v, want 1", got)
	}
	if got := metric(t, reg, "fusebox_queue_owned_shards", nil); got != 0 {
		t.Fatalf("owned shards %v after fencing, want 0", got)
	}
	// The fenced shard stays stopped at this epoch; a new epoch restarts it.
	if _, err := e.holder.Store(singleOwnerMap(t, 1, "a", 3, 3)); err != nil {
		t.Fatal(err)
	}
	stale.Set(map[int]uint64{0: 3})
	testwait.For(t, 10*time.Second, "delivery at the new epoch", func() bool {
		got, _ := e.store.Task("late")
		return got.Status == queue.StatusSucceeded
	})
}

// TestReadCursorFindsTasksDueBeforeIt: the reader reads from a cursor past
// the tasks it has in flight; a task that becomes pending with an earlier
// due time (a submit stamped by a node whose clock is behind) must still be
// read, by the periodic full read, and not wait for the in-flight ones.
func TestReadCursorFindsTasksDueBeforeIt(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	e.start(t, fastCfg(), exec, nil)
	now := time.Now()
	late := callback("late", 0, "d", "http://127.0.0.1:9/cb")
	late.NextAttemptAt = now
	e.add(t, late)
	testwait.For(t, 10*time.Second, "the first task in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == 1 })

	early := callback("early", 0, "d", "http://127.0.0.1:9/cb")
	early.NextAttemptAt = now.Add(-time.Minute) // far before the cursor and its lag
	e.add(t, early)
	testwait.For(t, 10*time.Second, "the earlier task read while the first is in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == 2 })
	close(exec.release)
	testwait.For(t, 10*time.Second, "both succeeded", func() bool { return e.allStatus([]queue.Task{late, early}, queue.StatusSucceeded) })
}

// startTracked starts a queue for node "a" on e's store as a
// queue.DueLowStore, with the full-read backstop an hour away: whatever it
// reads, it reads from its cursor or from the low the store reports.
func (e *env) startTracked(t *testing.T, cfg queue.Config, exec queue.Executor) *queue.Queue {
	t.Helper()
	cfg.FullReadBackstop = time.Hour
	d := e.deps("a", exec)
	d.Store = e.store.Tracked()
	return launch(t, cfg, d)
}

// TestTrackedReadsStartAtTheCursor: with a store that reports the tasks
// committed behind the cursor, a read starts at the cursor, so it does not
// walk the tasks in flight behind it (a read from cursor-cursorLag walked
// all of them on every wake-up); a task committed behind the cursor is read
// from the low the store reports, with no full read to find it.
func TestTrackedReadsStartAtTheCursor(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	e.startTracked(t, fastCfg(), exec)
	tasks := callbacks(12, 1, "cur", "d")
	for i := range tasks { // one at a time: a read per task, each with the others in flight
		e.add(t, tasks[i])
		testwait.For(t, 10*time.Second, "the task in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == i+1 })
	}
	// A read from the cursor passes over the one task at the cursor at most.
	if n := e.store.Passed(); n > 2*len(tasks) {
		t.Fatalf("reads walked past tasks in flight %d times for %d reads", n, len(tasks))
	}
	early := callback("early", 0, "d", "http://127.0.0.1:9/cb")
	early.NextAttemptAt = time.Now().Add(-time.Minute) // behind the cursor, and far behind any lag
	e.add(t, early)
	testwait.For(t, 10*time.Second, "the task behind the cursor read", func() bool {
		_, inflight, _ := exec.stats()
		return inflight == len(tasks)+1
	})
	close(exec.release)
	testwait.For(t, 10*time.Second, "all succeeded", func() bool { return e.allStatus(append(tasks, early), queue.StatusSucceeded) })
}

// TestTrackedReadCutShortStartsThereAgain: a read from a low behind the
// cursor that stops at the shard's bound leaves the rest behind the cursor;
// the next read starts from that low again, not from the cursor (where
// only a full read, an hour away here, would find them).
func TestTrackedReadCutShortStartsThereAgain(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	cfg := fastCfg()
	cfg.MaxPendingPerShard = 4
	cfg.DestinationShare = 4 // its one destination may fill the window
	e.startTracked(t, cfg, exec)
	first := callbacks(2, 1, "now", "d")
	e.add(t, first...)
	testwait.For(t, 10*time.Second, "two tasks in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == 2 })
	early := earlyCallbacks(5)
	e.add(t, early...) // two fit under the bound; three wait behind the cursor
	testwait.For(t, 10*time.Second, "the shard at its bound", func() bool { _, inflight, _ := exec.stats(); return inflight == 4 })
	close(exec.release)
	testwait.For(t, 10*time.Second, "all succeeded", func() bool { return e.allStatus(append(first, early...), queue.StatusSucceeded) })
}

// earlyCallbacks is n callbacks to d due a minute ago, a millisecond
// apart: behind any reader's cursor, in due order.
func earlyCallbacks(n int) []queue.Task {
	early := callbacks(n, 1, "early", "d")
	for i := range early {
		early[i].NextAttemptAt = time.Now().Add(-time.Minute + time.Duration(i)*time.Millisecond)
	}
	return early
}

// TestTrackedReadCutShortResumesWhereItStopped: reads from a low behind
// the cursor that each stop at the batch size go on from where the last
// stopped, not from the low again: the tasks the earlier reads took, in
// flight by then, are not walked again by each later read.
func TestTrackedReadCutShortResumesWhereItStopped(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.BatchSize = 4
	e := newEnv(t, 1, lim)
	exec := newFakeExec(true)
	e.startTracked(t, fastCfg(), exec)
	first := callbacks(1, 1, "now", "d")
	e.add(t, first...)
	testwait.For(t, 10*time.Second, "one task in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == 1 })
	early := earlyCallbacks(40)
	before := e.store.Passed()
	e.add(t, early...) // ten reads of four, each from behind the cursor
	testwait.For(t, 10*time.Second, "every task in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == 1+len(early) })
	// Starting again from the low, the reads passed 4+8+…+36 = 180 tasks
	// in flight; resuming, a few per read at most.
	if n := e.store.Passed() - before; n > 2*len(early) {
		t.Fatalf("the reads walked past tasks in flight %d times for %d tasks", n, len(early))
	}
	close(exec.release)
	testwait.For(t, 10*time.Second, "all succeeded", func() bool { return e.allStatus(append(first, early...), queue.StatusSucceeded) })
}

// lapsingStore is a TrackedStore whose reports can lapse
// (queue.DueLowTracker): while not tracked, it loses every low, as a
// database store loses the notifications sent while it is not listening.
type lapsingStore struct {
	queuetest.TrackedStore
	tracked atomic.Bool
}

func (l *lapsingStore) DueLowsTracked() bool { return l.tracked.Load() }

func (l *lapsingStore) TakeDueLow(shard int) (time.Time, bool) {
	at, ok := l.TrackedStore.TakeDueLow(shard)
	if !l.tracked.Load() {
		return time.Time{}, false
	}
	return at, ok
}

// TestLapsedTrackingReadsAsUntracked: while the store's reports lapse
// (DueLowsTracked false), a reader reads as with a store without them, so
// a task committed behind its cursor, whose low the store lost, is found
// by the frequent full read; the tracked backstop is an hour away here.
// A reader that kept reading from its cursor would never see it.
func TestLapsedTrackingReadsAsUntracked(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	cfg := fastCfg()
	cfg.FullReadBackstop = time.Hour
	store := &lapsingStore{TrackedStore: e.store.Tracked()}
	store.tracked.Store(true)
	d := e.deps("a", exec)
	d.Store = store
	launch(t, cfg, d)
	first := callbacks(2, 1, "now", "d")
	e.add(t, first...)
	testwait.For(t, 10*time.Second, "two tasks in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == 2 })
	store.tracked.Store(false)
	early := callback("early", 0, "d", "http://127.0.0.1:9/cb")
	early.NextAttemptAt = time.Now().Add(-time.Minute) // behind the cursor, and far behind any lag
	e.add(t, early)
	testwait.For(t, 10*time.Second, "the task behind the cursor read", func() bool {
		_, inflight, _ := exec.stats()
		return inflight == 3
	})
	close(exec.release)
	testwait.For(t, 10*time.Second, "all succeeded", func() bool { return e.allStatus(append(first, early), queue.StatusSucceeded) })
}

// A reader at its in-flight bound has nothing to read until a result or a
// release frees room (both signal it). It must sleep, not loop: with the
// read-cursor backstop still armed from its last read, its timer came due
// at once on every wake-up and the reader spun (about a million empty
// loop iterations a second across a loaded cluster's readers).
func TestReaderAtCapacitySleeps(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	cfg := fastCfg()
	cfg.MaxPendingPerShard = 2
	cfg.DestinationShare = 2 // its one destination may fill the window
	q := e.start(t, cfg, exec, nil)
	tasks := callbacks(4, 1, "cap", "d")
	// One task, then the next while the first is in flight: the second
	// read starts at the cursor, which arms the full-read backstop.
	e.add(t, tasks[0])
	testwait.For(t, 10*time.Second, "the first task in flight", func() bool { _, inflight, _ := exec.stats(); return inflight == 1 })
	e.add(t, tasks[1:]...)
	testwait.For(t, 10*time.Second, "the shard at its bound", func() bool { _, inflight, _ := exec.stats(); return inflight == 2 })
	before, _ := q.ShardState(0)
	mark := time.Now()
	testwait.For(t, 10*time.Second, "several backstop periods to pass", func() bool { return time.Since(mark) > 500*time.Millisecond })
	after, _ := q.ShardState(0)
	if n := after.Wakeups - before.Wakeups; n > 50 {
		t.Fatalf("the reader looped %d times in %v while at its bound", n, time.Since(mark).Round(time.Millisecond))
	}
	close(exec.release)
	testwait.For(t, 10*time.Second, "all delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
}

// fusebox_queue_depth follows the shard's pending tasks although the reader
// refreshes it only when a read loaded tasks or results were written: it
// shows the tasks once they are read and drops to 0 once their results are
// written.
func TestDepthFollowsPendingTasks(t *testing.T) {
	e := newEnv(t, 2, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	reg := prometheus.NewRegistry()
	e.startNode(t, "a", fastCfg(), exec, nil, reg)
	e.add(t, callbacks(4, 2, "depth", "d")...) // two per shard
	depth := func(shard string) float64 {
		return metric(t, reg, "fusebox_queue_depth", map[string]string{"shard": shard})
	}
	testwait.For(t, 10*time.Second, "depth 2 on both shards", func() bool { return depth("0") == 2 && depth("1") == 2 })
	close(exec.release)
	testwait.For(t, 10*time.Second, "depth 0 on both shards", func() bool { return depth("0") == 0 && depth("1") == 0 })
}

// staleOwnership is an Ownership whose freshness the test sets (the
// ownership manager's Fresh: in contact with the Raft leader), and whether
// the map it holds still gives the shards to this node (OwnsAt; disowned
// false to begin with).
type staleOwnership struct {
	queue.Ownership
	fresh    atomic.Bool
	disowned atomic.Bool
}

func (o *staleOwnership) Fresh() bool                 { return o.fresh.Load() }
func (o *staleOwnership) OwnsAt(_ int, _ uint64) bool { return !o.disowned.Load() }

// startStale starts a queue for node "a" whose freshness the test sets
// (fresh to begin with).
func (e *env) startStale(t *testing.T, cfg queue.Config, exec queue.Executor, fresh bool) (*queue.Queue, *staleOwnership) {
	d := e.deps("a", exec)
	own := &staleOwnership{Ownership: d.Ownership}
	own.fresh.Store(fresh)
	d.Ownership = own
	return launch(t, cfg, d), own
}

// A node in contact whose map already gives a shard to another owner
// makes no call for it, before the change reaches the queue's Watch: a
// node restarted on an old map on its disk started that map's shards, and
// caught up on a newer one in which other nodes own them. Before
// EpochOwnership it called their tasks in that moment (a duplicate of the
// owners' calls, one in about twelve rolling restarts). Its tasks wait,
// unread, and go once the map gives the shard back.
func TestShardMovedInHeldMapMakesNoCall(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(false)
	q, own := e.startStale(t, fastCfg(), exec, true)
	own.disowned.Store(true)
	testwait.For(t, 10*time.Second, "the shard's reader to start", func() bool { _, ok := q.ShardState(0); return ok })
	tasks := callbacks(20, 1, "moved", "d")
	e.add(t, tasks...)
	before, _ := q.ShardState(0)
	testwait.For(t, 10*time.Second, "the reader to look several times (or a call)", func() bool {
		st, _ := q.ShardState(0)
		n, _, _ := exec.stats()
		return st.Wakeups >= before.Wakeups+5 || n > 0
	})
	if n, _, _ := exec.stats(); n != 0 {
		t.Fatalf("%d calls for a shard the held map gives to another owner", n)
	}
	if n := e.store.Loaded(); n != 0 {
		t.Fatalf("%d tasks loaded for a shard the held map gives to another owner", n)
	}
	own.disowned.Store(false)
	testwait.For(t, 10*time.Second, "all delivered once the map gives the shard back", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
}

// A node out of contact with the cluster reads no tasks: each would be
// released unsent (stale_ownership) and parked, and each park's expiry
// forced a full read of the shard. Once it is in contact again it delivers
// them.
func TestStaleNodeReadsNothing(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	q, own := e.startStale(t, fastCfg(), newFakeExec(false), false)
	testwait.For(t, 10*time.Second, "the shard's reader to start", func() bool { _, ok := q.ShardState(0); return ok })
	tasks := callbacks(20, 1, "stale", "d")
	e.add(t, tasks...)
	before, _ := q.ShardState(0)
	testwait.For(t, 10*time.Second, "the reader to look several times", func() bool {
		st, _ := q.ShardState(0)
		return st.Wakeups >= before.Wakeups+5
	})
	if n := e.store.Loaded(); n != 0 {
		t.Fatalf("a node out of contact loaded %d tasks", n)
	}
	if n := metric(t, e.reg, "fusebox_queue_scheduler_rejections_total", map[string]string{"reason": "stale_ownership"}); n != 0 {
		t.Fatalf("%v tasks released as stale_ownership", n)
	}
	own.fresh.Store(true)
	testwait.For(t, 10*time.Second, "all delivered once in contact", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
}

// A node that falls out of contact while tasks are held for a full buffer
// does not spin: the held tasks' retry time passes while nothing may be
// read, and the reader must still sleep until its next look (RejectRetry),
// not wake at once for them again and again. The bound is loose (the
// reader looks about 10 times in the second at RejectRetry 100 ms; the
// busy loop looked hundreds of thousands of times).
func TestStaleNodeWithHeldTasksDoesNotSpin(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.BufferSize, lim.Concurrency = 2, 1
	e := newEnv(t, 1, lim)
	cfg := fastCfg()
	cfg.RejectRetry = 100 * time.Millisecond
	exec := newFakeExec(true)
	q, own := e.startStale(t, cfg, exec, true)
	tasks := callbacks(8, 1, "held-stale", "d")
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "refused tasks held", func() bool {
		st, _ := q.ShardState(0)
		return st.Held > 0
	})
	own.fresh.Store(false)
	before, _ := q.ShardState(0)
	start := time.Now()
	testwait.For(t, 10*time.Second, "a second out of contact", func() bool { return time.Since(start) >= time.Second })
	if st, _ := q.ShardState(0); st.Wakeups-before.Wakeups > 100 {
		t.Fatalf("the reader woke %d times in a second out of contact with %d tasks held: it spins", st.Wakeups-before.Wakeups, st.Held)
	}
	own.fresh.Store(true)
	close(exec.release)
	testwait.For(t, 10*time.Second, "all delivered once in contact", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
}
