package queuetest_test

import (
	"context"
	"testing"
	"time"

	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/shardmap"
)

func TestStoreDueOrderSkipAndFencing(t *testing.T) {
	m, _ := shardmap.New(2)
	m.Version = 1
	m.Shards[0].Owner, m.Shards[0].Epoch = "a", 4
	h := &shardmap.Holder{}
	if _, err := h.Store(m); err != nil {
		t.Fatal(err)
	}
	s := queuetest.NewStore(h)
	base := time.Now().Add(-time.Minute)
	add := func(id string, shard int, at time.Time) {
		if err := s.Add(queue.Task{ID: id, Shard: shard, CreatedAt: base, NextAttemptAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	add("late", 0, base.Add(3*time.Second))
	add("early", 0, base.Add(time.Second))
	add("mid", 0, base.Add(2*time.Second))
	add("future", 0, time.Now().Add(time.Hour))
	add("other", 1, base)
	if err := s.Add(queue.Task{ID: "early"}); err == nil {
		t.Fatal("duplicate id accepted")
	}
	if err := s.Add(queue.Task{ID: "x", Shard: 2}); err == nil {
		t.Fatal("shard out of range accepted")
	}
	ch, cancel := s.Subscribe()
	defer cancel()

	got, next, known := s.Due(0, time.Time{}, time.Now(), 2, func(id string) bool { return id == "early" })
	if len(got) != 2 || got[0].ID != "mid" || got[1].ID != "late" {
		t.Fatalf("Due = %+v, want mid, late", got)
	}
	if !known || next.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("Due's next = %v, %v, want the future task's due time", next, known)
	}
	if got, _, known := s.Due(0, time.Time{}, time.Now(), 1, nil); len(got) != 1 || known {
		t.Fatalf("Due with limit 1 = %d tasks, next known %v: the walk stopped at the limit before now", len(got), known)
	}
	if next, ok := s.NextDue(0, time.Now()); !ok || next.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("NextDue = %v, %v", next, ok)
	}
	if s.Backlog(0) != 4 {
		t.Fatalf("backlog %d", s.Backlog(0))
	}
	ctx := context.Background()
	if err := s.Complete(ctx, 0, 3, []queue.Result{{TaskID: "mid", Status: queue.StatusSucceeded}}); err == nil {
		t.Fatal("stale epoch accepted")
	}
	if err := s.Complete(ctx, 1, 0, []queue.Result{{TaskID: "other", Status: queue.StatusSucceeded}}); err == nil {
		t.Fatal("write to an unowned shard accepted")
	}
	res := []queue.Result{{TaskID: "mid", Status: queue.StatusSucceeded, Attempts: 1}, {TaskID: "other", Status: queue.StatusFailed}}
	if err := s.Complete(ctx, 0, 4, res); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("subscriber not woken")
	}
	if tk, _ := s.Task("mid"); tk.Status != queue.StatusSucceeded || tk.Attempts != 1 || s.Backlog(0) != 3 {
		t.Fatalf("mid after Complete: %+v", tk)
	}
	if tk, _ := s.Task("other"); tk.Status != queue.StatusPending {
		t.Fatal("a result for another shard's task was applied")
	}
	// A second terminal result for the same task is ignored.
	if err := s.Complete(ctx, 0, 4, []queue.Result{{TaskID: "mid", Status: queue.StatusFailed}}); err != nil {
		t.Fatal(err)
	}
	if tk, _ := s.Task("mid"); tk.Status != queue.StatusSucceeded || len(s.Results("mid")) != 1 {
		t.Fatalf("terminal task changed: %+v", tk)
	}
}
