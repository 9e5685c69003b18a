package state

import (
	"bytes"
	"testing"
	"time"
)

// TestTakeDueLowReportsRowsEnteringTheDueOrder: a shard's low is the
// earliest due time of the rows added to its due order or moved in it
// since the last take — not of rows rewritten where they were (a start
// marker), not of other shards — and a take clears it. A restored
// snapshot reports the zero time for every shard with pending rows.
func TestTakeDueLowReportsRowsEnteringTheDueOrder(t *testing.T) {
	x := newTaskFSM(t)
	a := newTaskFor("a", "ns", "wf-low", "")
	shard := a.Shard
	if _, ok := x.st.TakeDueLow(shard); ok {
		t.Fatal("a low before any task")
	}
	b := newTaskFor("b", "ns", "wf-low", "")
	x.submit(t0.Add(time.Second), 0, a)
	x.submit(t0, 0, b) // committed after a, stamped before it
	if low, ok := x.st.TakeDueLow(shard); !ok || !low.Equal(t0) {
		t.Fatalf("low %v %v, want %v (the earlier of the two submits)", low, ok, t0)
	}
	if _, ok := x.st.TakeDueLow(shard); ok {
		t.Fatal("the low was not cleared by the take")
	}
	for s := range taskShards {
		if _, ok := x.st.TakeDueLow(s); s != shard && ok {
			t.Fatalf("shard %d reports a low for a submit to shard %d", s, shard)
		}
	}

	node, epoch := x.owner(shard)
	x.complete(shard, node, epoch, TaskResult{TaskID: "a", Status: TaskPending, NextAttemptAt: t0.Add(time.Second), Started: true})
	if low, ok := x.st.TakeDueLow(shard); ok {
		t.Fatalf("a start marker (row rewritten in place) reported low %v", low)
	}
	retry := t0.Add(time.Hour)
	x.complete(shard, node, epoch, TaskResult{TaskID: "b", Status: TaskPending, Attempts: 1, NextAttemptAt: retry})
	if low, ok := x.st.TakeDueLow(shard); !ok || !low.Equal(retry) {
		t.Fatalf("after a reschedule: low %v %v, want %v", low, ok, retry)
	}
	x.complete(shard, node, epoch, TaskResult{TaskID: "a", Status: TaskSucceeded, Attempts: 1})
	if low, ok := x.st.TakeDueLow(shard); ok {
		t.Fatalf("a row leaving the due order reported low %v", low)
	}

	dst := newTestFSM(t, StateOptions{})
	if err := dst.Restore(bytes.NewReader(snapshotBytes(t, x.f))); err != nil {
		t.Fatal(err)
	}
	if low, ok := dst.State().TakeDueLow(shard); !ok || !low.IsZero() {
		t.Fatalf("after a restore: low %v %v, want the zero time", low, ok)
	}
}
