package pgstore

import (
	"encoding/json"
	"testing"
	"time"

	"fusebox/queue"
	"fusebox/raftstore/state"
)

// The status page's counts per destination, from real rows: pending (a
// callback counted under its breaker destination), blocked and DLQ; a
// bounded walk says it was partial.
func TestDestinationCounts(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	now := time.Now().UTC()
	task := func(id, dest, key string) state.NewTask {
		return state.NewTask{ID: id, Shard: 0, NamespaceID: "ns", WorkflowID: id, TaskGroup: "callbacks.Invocation",
			Destination: dest, DestinationKey: key, Request: json.RawMessage(`{}`)}
	}
	if _, err := s.Submit(ctx, []state.NewTask{
		task("a1", "http://a/cb?x=1", "http://a"), task("a2", "http://a/cb?x=2", "http://a"), task("a3", "http://a/cb?x=3", "http://a"),
		task("b1", "endpoint-b", ""), task("b2", "endpoint-b", ""),
	}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Acquire(ctx, 0, "n1", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, 0, 1, []queue.Result{
		{TaskID: "a1", Status: queue.StatusPending, Attempts: 1, Blocked: 1, NextAttemptAt: now.Add(time.Minute)},
		{TaskID: "b1", Status: queue.StatusDLQ, Attempts: 3, Message: "poison"},
	}); err != nil {
		t.Fatal(err)
	}
	got, partial, err := s.DestinationCounts(ctx, 100)
	if err != nil || partial {
		t.Fatalf("counts: %v (partial %v)", err, partial)
	}
	want := []state.DestinationCount{
		{Namespace: "ns", Destination: "http://a", Pending: 3, Blocked: 1},
		{Namespace: "ns", Destination: "endpoint-b", Pending: 1, DLQ: 1},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("counts = %+v, want %+v", got, want)
	}
	if _, partial, err := s.DestinationCounts(ctx, 2); err != nil || !partial {
		t.Fatalf("a walk stopped at 2 of 5 rows: partial %v, %v", partial, err)
	}
}
