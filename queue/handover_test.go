package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

// The leader releases shard 1 before moving it: a stops starting calls on
// it, its calls under way end and their results are written at its epoch,
// and only then does the move land. b then has nothing left to call: no
// task is delivered twice and a counts no abandoned call. Shard 0, not
// released, keeps working.
func TestHandOverBeforeMoveDeliversOnce(t *testing.T) {
	e := newEnv(t, 2, queuetest.DefaultLimits())
	execA, execB := newFakeExec(true), newFakeExec(false)
	regA := prometheus.NewRegistry()
	qa := e.startNode(t, "a", fastCfg(), execA, nil, regA)
	e.startNode(t, "b", fastCfg(), execB, nil, prometheus.NewRegistry())
	tasks := callbacks(6, 2, "rel", "d") // 3 on shard 0, 3 on shard 1
	e.add(t, tasks...)
	testwait.For(t, 10*time.Second, "a calling all six", func() bool { _, in, _ := execA.stats(); return in == 6 })

	done := make(chan []queue.HandedOver, 1)
	go func() { done <- qa.HandOver(t.Context(), map[int]uint64{1: 1, 0: 9 /* not this epoch */}, time.Minute) }()
	testwait.For(t, 10*time.Second, "shard 1 held", func() bool { st, _ := qa.ShardState(1); return st.HandedOver })
	// More tasks for shard 1 while it is held: not called by a.
	late := callbacks(2, 1, "late", "d") // shard 0 ids, moved to shard 1 below
	for i := range late {
		late[i].Shard = 1
	}
	e.add(t, late...)
	select {
	case r := <-done:
		t.Fatalf("HandOver returned %+v with shard 1's calls still under way", r)
	case <-time.After(50 * time.Millisecond): // a window for a wrong early answer, not a wait for a state
	}
	close(execA.release) // the calls under way end
	var rel []queue.HandedOver
	select {
	case rel = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("HandOver did not return after the calls ended")
	}
	if len(rel) != 1 || rel[0].Shard != 1 || rel[0].Epoch != 1 || rel[0].Unfinished != 0 {
		t.Fatalf("HandOver answered %+v, want shard 1 at epoch 1 settled", rel)
	}
	for _, tk := range tasks {
		if tk.Shard == 1 {
			if got, _ := e.store.Task(tk.ID); got.Status != queue.StatusSucceeded {
				t.Fatalf("task %s of the released shard is %q after HandOver: its result was not written", tk.ID, got.Status)
			}
		}
	}
	if n, _, _ := execA.stats(); n != 6 {
		t.Fatalf("a made %d calls, want 6: it called a task of the released shard", n)
	}

	m := singleOwnerMap(t, 2, "a", 1, 2)
	m.Shards[1].Owner, m.Shards[1].Epoch = "b", 2
	if _, err := e.holder.Store(m); err != nil {
		t.Fatal(err)
	}
	all := append(append([]queue.Task(nil), tasks...), late...)
	testwait.For(t, 10*time.Second, "every task delivered", func() bool { return e.allStatus(all, queue.StatusSucceeded) })
	if n, _, _ := execB.stats(); n != len(late) {
		t.Fatalf("b made %d calls, want %d (only the tasks submitted after the release)", n, len(late))
	}
	for _, tk := range all {
		if res := e.store.Results(tk.ID); len(res) != 1 || res[0].Attempts != 1 {
			t.Fatalf("task %s results %+v: want exactly one terminal result", tk.ID, res)
		}
	}
	for _, reason := range []string{"in_flight", "unacked"} {
		if got := metric(t, regA, "fusebox_queue_abandoned_calls_total", map[string]string{"reason": reason}); got != 0 {
			t.Fatalf("a abandoned %v calls (%s) at a move it had released for", got, reason)
		}
	}
}

// A release whose move never comes ends with its hold: the shard works
// again. One whose calls do not end in time reports them unfinished.
func TestHandOverHoldEndsAndUnfinishedCalls(t *testing.T) {
	e := newEnv(t, 1, queuetest.DefaultLimits())
	exec := newFakeExec(true)
	q := e.start(t, fastCfg(), exec, nil)
	first := callbacks(2, 1, "held", "d")
	e.add(t, first...)
	testwait.For(t, 10*time.Second, "two calls under way", func() bool { _, in, _ := exec.stats(); return in == 2 })

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	rel := q.HandOver(ctx, map[int]uint64{0: 1}, 300*time.Millisecond)
	if len(rel) != 1 || rel[0].Unfinished != 2 {
		t.Fatalf("HandOver with two calls held past its context answered %+v, want 2 unfinished", rel)
	}
	close(exec.release)
	testwait.For(t, 10*time.Second, "the held calls' results", func() bool { return e.allStatus(first, queue.StatusSucceeded) })
	after := callbacks(1, 1, "after", "d")
	e.add(t, after...)
	testwait.For(t, 10*time.Second, "a task submitted during the hold delivered once the hold ended", func() bool {
		return e.allStatus(after, queue.StatusSucceeded)
	})
	if n, _, _ := exec.stats(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}
