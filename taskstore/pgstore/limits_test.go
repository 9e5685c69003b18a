package pgstore

import (
	"fmt"
	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/raftstore/state"
)

// A destination's backlog is counted only when the table's reused pending
// total does not rule the limit out (destBound): two stores on one
// database, as two nodes. The other node's tasks are invisible to this
// node's reused total, so while that total is under half the limit this
// node does not count the destination — the documented margin — and past
// half it counts afresh and refuses exactly.
func TestDestinationLimitCountsOnlyNearTheLimit(t *testing.T) {
	url := pgtest.NewDatabase(t)
	open := func() *Store {
		s, err := Open(t.Context(), Config{URL: url, PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	other, self := open(), open()
	ctx := t.Context()
	const limit = 10
	n := 0
	task := func() state.NewTask {
		n++
		nt := wakeTask(n, 0)
		nt.RequestID = fmt.Sprint("r", n)
		nt.MaxDestinationBacklog = limit
		return nt
	}
	submit := func(s *Store, tasks ...state.NewTask) []state.SubmitOutcome {
		t.Helper()
		out, err := s.Submit(ctx, tasks, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// This node counts the table now (0 pending), then the other node
	// fills the destination to its limit.
	if got := self.PendingTasks(ctx); got != 0 {
		t.Fatalf("pending %d, want 0", got)
	}
	var fill []state.NewTask
	for range limit {
		fill = append(fill, task())
	}
	for _, o := range submit(other, fill...) {
		if o.Outcome != state.SubmitAccepted {
			t.Fatalf("filling: %+v", o)
		}
	}
	// Reused total 0, a task: far under half the limit, not counted.
	if o := submit(self, task())[0]; o.Outcome != state.SubmitAccepted {
		t.Fatalf("under half the limit by the reused total: %+v, want accepted without a count", o)
	}
	// A reused total past half the limit: counted, 11 pending, refused.
	self.pending.set(limit/2, time.Now())
	if o := submit(self, task())[0]; o.Outcome != state.SubmitOverloaded || o.Reason != state.OverloadDestination {
		t.Fatalf("past half the limit: %+v, want refused for the destination", o)
	}
	// So is a batch that carries the total past half.
	self.pending.set(0, time.Now())
	batch := make([]state.NewTask, limit/2+1)
	for i := range batch {
		batch[i] = task()
	}
	for i, o := range submit(self, batch...) {
		if o.Outcome != state.SubmitOverloaded {
			t.Fatalf("task %d of a batch of %d: %+v, want refused", i, len(batch), o)
		}
	}
	// A stale total is read again first, then the destination is counted.
	self.pending.drop()
	if o := submit(self, task())[0]; o.Outcome != state.SubmitOverloaded {
		t.Fatalf("with the total unknown: %+v, want refused", o)
	}
	if got := self.PendingTasks(ctx); got != limit+1 {
		t.Fatalf("pending %d, want %d", got, limit+1)
	}
}

func TestDestBound(t *testing.T) {
	for _, c := range []struct {
		total, n, limit int
		want            bool
	}{
		{0, 1, 100_000, true},
		{49_000, 500, 100_000, true},
		{49_600, 500, 100_000, false},
		{0, 1, 1, false},
		{0, 1, 2, true},
		{1, 1, 2, false},
	} {
		if got := destBound(c.total, c.n, c.limit); got != c.want {
			t.Errorf("destBound(%d, %d, %d) = %v, want %v", c.total, c.n, c.limit, got, c.want)
		}
	}
}
