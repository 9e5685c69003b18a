// Package storetest is the behaviour every task store shares, run against
// the raft store (node) and the postgres store (taskstore/pgstore).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"fusebox/queue"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
	"fusebox/transport"
)

// Store is a task store as the suite drives it: the queue's view plus
// submit and read-back.
type Store interface {
	queue.Store
	// Submit inserts tasks (ID and Shard set) due at `at`; it returns once
	// they are committed and readable through this store.
	Submit(ctx context.Context, tasks []state.NewTask, at time.Time) ([]state.SubmitOutcome, error)
	Task(ctx context.Context, id string) (state.Task, bool, error)
	API
}

// Harness is one fresh store with Shards shards, every shard owned by
// "n1" at the epoch Epoch(shard) returns.
type Harness struct {
	Store  Store
	Shards int
	// Epoch is the current owner epoch of shard (n1's at the start).
	Epoch func(shard int) uint64
	// Take makes node the owner of shard under a new, higher epoch (a
	// reassignment committed and, for a fenced store, acquired) and
	// returns that epoch.
	Take func(t *testing.T, shard int, node string) uint64
	// As is the store as node writes to it (the raft store signs its
	// writes with the node's id; a database store ignores it).
	As func(node string) Store
}

// Run runs the suite; newHarness is called once per subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("SubmitDueComplete", func(t *testing.T) { testSubmitDueComplete(t, newHarness(t)) })
	t.Run("IdempotentSubmit", func(t *testing.T) { testIdempotentSubmit(t, newHarness(t)) })
	t.Run("DuePagesWithSkip", func(t *testing.T) { testDuePages(t, newHarness(t)) })
	t.Run("StaleOwnerWritesDoNotLand", func(t *testing.T) { testStaleOwner(t, newHarness(t)) })
	t.Run("ListPages", func(t *testing.T) { testListPages(t, newHarness(t)) })
	t.Run("DLQRedrive", func(t *testing.T) { testRedrive(t, newHarness(t)) })
	t.Run("SubmitLimits", func(t *testing.T) { testSubmitLimits(t, newHarness(t)) })
	t.Run("ShardStatsAndCollect", func(t *testing.T) { testStatsCollect(t, newHarness(t)) })
	t.Run("BlockedByKey", func(t *testing.T) { testBlocked(t, newHarness(t)) })
	t.Run("BlockedWalkSparse", func(t *testing.T) { testBlockedSparse(t, newHarness(t)) })
	t.Run("LaterByKey", func(t *testing.T) { testLater(t, newHarness(t)) })
}

func newTask(h Harness, ns, wf, requestID string, i int) state.NewTask {
	req := transport.Request{TaskGroup: "callbacks.Invocation", URL: "http://127.0.0.1:9/cb", Body: []byte(fmt.Sprint(i))}
	raw, _ := json.Marshal(req)
	return state.NewTask{
		ID: state.NewTaskID(time.Now().Add(time.Duration(i))), Shard: shardmap.ShardOf(ns, wf, h.Shards),
		NamespaceID: ns, WorkflowID: wf, TaskGroup: req.TaskGroup, Destination: req.URL,
		DestinationKey: "http://127.0.0.1:9", RequestID: requestID, Request: raw,
	}
}

func submit(t *testing.T, h Harness, tasks ...state.NewTask) []state.SubmitOutcome {
	t.Helper()
	out, err := h.Store.Submit(t.Context(), tasks, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(tasks) {
		t.Fatalf("%d outcomes for %d tasks", len(out), len(tasks))
	}
	return out
}

func testSubmitDueComplete(t *testing.T, h Harness) {
	ctx := t.Context()
	wake, cancel := h.Store.Subscribe()
	defer cancel()
	a, b := newTask(h, "ns", "wf", "", 0), newTask(h, "ns", "wf", "", 1)
	b.Request = json.RawMessage(`{"timeout":"soon"}`)
	out := submit(t, h, a, b)
	for _, o := range out {
		if o.Outcome != state.SubmitAccepted {
			t.Fatalf("outcomes = %+v", out)
		}
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("submit did not wake the subscription")
	}
	shard := a.Shard
	if n := h.Store.Backlog(shard); n != 2 {
		t.Fatalf("backlog = %d, want 2", n)
	}
	due, _, _ := h.Store.Due(shard, time.Time{}, time.Now().Add(time.Second), 10, nil)
	var req transport.Request
	if len(due) != 2 || due[0].ID != a.ID || due[0].Status != queue.StatusPending || json.Unmarshal(due[0].Request, &req) != nil ||
		string(req.Body) != "0" || queue.KeyOf(&due[0]).Destination != "http://127.0.0.1:9" {
		t.Fatalf("due = %+v", due)
	}
	// The stored request is handed over as stored, decodable or not: the
	// queue decodes it (and dead-letters one that does not decode).
	if got := string(due[1].Request); got != `{"timeout":"soon"}` {
		t.Fatalf("undecodable request handed over as %s", got)
	}

	epoch := h.Epoch(shard)
	retryAt := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	results := []queue.Result{
		{TaskID: a.ID, Status: queue.StatusPending, Attempts: 1, NextAttemptAt: retryAt, Message: "503", HTTPStatus: 503},
		{TaskID: b.ID, Status: queue.StatusDLQ, Message: "poison task"},
	}
	err := h.Store.Complete(ctx, shard, epoch+1, results)
	var woe *shardmap.WrongOwnerError
	if !errors.As(err, &woe) || woe.Epoch != epoch || !errors.Is(err, shardmap.ErrWrongOwner) {
		t.Fatalf("complete at a future epoch = %v, want a WrongOwnerError at epoch %d", err, epoch)
	}
	if n := h.Store.Backlog(shard); n != 2 {
		t.Fatalf("a refused batch changed the backlog to %d", n)
	}
	if err := h.Store.Complete(ctx, shard, epoch, results); err != nil {
		t.Fatal(err)
	}
	if next, ok := h.Store.NextDue(shard, time.Now()); !ok || !next.Equal(retryAt) {
		t.Fatalf("next due = %v %v, want %v", next, ok, retryAt)
	}
	if due, _, _ := h.Store.Due(shard, time.Time{}, time.Now(), 10, nil); len(due) != 0 || h.Store.Backlog(shard) != 1 {
		t.Fatalf("after complete: due %d, backlog %d", len(due), h.Store.Backlog(shard))
	}
	// A walk that goes past now says what comes next, as NextDue would
	// (the reader then skips that second lookup).
	if due, next, known := h.Store.Due(shard, time.Time{}, time.Now(), 10, nil); len(due) != 0 || !known || !next.Equal(retryAt) {
		t.Fatalf("Due past now = %d tasks, next %v (known %v), want none and %v", len(due), next, known, retryAt)
	}
	tk, ok, err := h.Store.Task(ctx, b.ID)
	if err != nil || !ok || tk.Status != state.TaskDLQ || tk.Message != "poison task" || tk.CompletedAt.IsZero() {
		t.Fatalf("dead-lettered task = %+v, %v, %v", tk, ok, err)
	}
	// Terminal results are final: a late duplicate is ignored.
	if err := h.Store.Complete(ctx, shard, epoch, []queue.Result{{TaskID: b.ID, Status: queue.StatusSucceeded}}); err != nil {
		t.Fatal(err)
	}
	if tk, _, _ := h.Store.Task(ctx, b.ID); tk.Status != state.TaskDLQ {
		t.Fatalf("terminal task changed: %+v", tk)
	}
	// A start marker records the epoch an attempt began under.
	if err := h.Store.Complete(ctx, shard, epoch, []queue.Result{{TaskID: a.ID, Started: true, Status: queue.StatusPending, Attempts: 1, NextAttemptAt: retryAt}}); err != nil {
		t.Fatal(err)
	}
	if tk, _, _ := h.Store.Task(ctx, a.ID); tk.AttemptEpoch != epoch || tk.Attempts != 1 || tk.HTTPStatus != 503 {
		t.Fatalf("after a start marker: %+v", tk)
	}
	if err := h.Store.Complete(ctx, shard, epoch, []queue.Result{{TaskID: a.ID, Status: queue.StatusSucceeded, Attempts: 2, OperationID: "op-1"}}); err != nil {
		t.Fatal(err)
	}
	if tk, _, _ := h.Store.Task(ctx, a.ID); tk.Status != state.TaskSucceeded || tk.AttemptEpoch != 0 || tk.OperationID != "op-1" || h.Store.Backlog(shard) != 0 {
		t.Fatalf("succeeded task = %+v", tk)
	}
}

func testIdempotentSubmit(t *testing.T, h Harness) {
	first := newTask(h, "ns", "wf-1", "req-1", 0)
	out := submit(t, h, first)
	again := newTask(h, "ns", "wf-1", "req-1", 1)
	other := newTask(h, "other-ns", "wf-1", "req-1", 2) // request ids are per namespace
	inBatch := newTask(h, "ns", "wf-2", "req-2", 3)
	inBatchAgain := newTask(h, "ns", "wf-2", "req-2", 4)
	out2 := submit(t, h, again, other, inBatch, inBatchAgain)
	if out2[0].Outcome != state.SubmitDuplicate || out2[0].TaskID != out[0].TaskID || out2[0].Shard != first.Shard {
		t.Fatalf("resubmit = %+v, want duplicate of %+v", out2[0], out[0])
	}
	if out2[1].Outcome != state.SubmitAccepted || out2[2].Outcome != state.SubmitAccepted {
		t.Fatalf("outcomes = %+v", out2)
	}
	if out2[3].Outcome != state.SubmitDuplicate || out2[3].TaskID != inBatch.ID {
		t.Fatalf("duplicate within a batch = %+v, want duplicate of %s", out2[3], inBatch.ID)
	}
	if _, ok, _ := h.Store.Task(t.Context(), again.ID); ok {
		t.Fatal("a duplicate was stored")
	}
}

func testDuePages(t *testing.T, h Harness) {
	const n = 25
	tasks := make([]state.NewTask, n)
	for i := range tasks {
		tasks[i] = newTask(h, "ns", "same-wf", "", i)
	}
	submit(t, h, tasks...)
	shard := tasks[0].Shard
	skipped := map[string]bool{tasks[0].ID: true, tasks[3].ID: true, tasks[4].ID: true}
	seen := map[string]bool{}
	var from time.Time
	for range n {
		page, _, _ := h.Store.Due(shard, from, time.Now().Add(time.Second), 4, func(id string) bool { return skipped[id] || seen[id] })
		if len(page) == 0 {
			break
		}
		if len(page) > 4 {
			t.Fatalf("page of %d, limit 4", len(page))
		}
		for i, tk := range page {
			if skipped[tk.ID] || seen[tk.ID] {
				t.Fatalf("skipped task %s returned", tk.ID)
			}
			if i > 0 && tk.NextAttemptAt.Before(page[i-1].NextAttemptAt) {
				t.Fatal("page not in due order")
			}
			seen[tk.ID] = true
		}
	}
	if len(seen) != n-len(skipped) {
		t.Fatalf("paged %d tasks, want %d", len(seen), n-len(skipped))
	}
}

// testStaleOwner is the fencing test: n1 owns a shard, is "paused" while
// the shard is reassigned to n2, then resumes and writes with its old
// epoch. None of its writes (ack, reschedule, DLQ, start marker) land; the
// new owner's do.
func testStaleOwner(t *testing.T, h Harness) {
	ctx := t.Context()
	tasks := []state.NewTask{newTask(h, "ns", "fenced", "", 0), newTask(h, "ns", "fenced", "", 1), newTask(h, "ns", "fenced", "", 2)}
	submit(t, h, tasks...)
	shard := tasks[0].Shard
	old := h.Epoch(shard)
	newEpoch := h.Take(t, shard, "n2")
	if newEpoch <= old {
		t.Fatalf("reassignment epoch %d not above %d", newEpoch, old)
	}
	stale := []queue.Result{
		{TaskID: tasks[0].ID, Status: queue.StatusSucceeded, Attempts: 1},
		{TaskID: tasks[1].ID, Status: queue.StatusPending, Attempts: 1, NextAttemptAt: time.Now().Add(time.Hour)},
		{TaskID: tasks[2].ID, Status: queue.StatusDLQ, Message: "poison"},
	}
	for i, r := range append(stale, queue.Result{TaskID: tasks[0].ID, Started: true, Status: queue.StatusPending, NextAttemptAt: time.Now()}) {
		err := h.Store.Complete(ctx, shard, old, []queue.Result{r})
		var woe *shardmap.WrongOwnerError
		if !errors.As(err, &woe) || woe.Owner != "n2" || woe.Epoch != newEpoch {
			t.Fatalf("stale write %d = %v, want WrongOwnerError(n2, %d)", i, err, newEpoch)
		}
	}
	for _, nt := range tasks {
		tk, ok, err := h.Store.Task(ctx, nt.ID)
		if err != nil || !ok || tk.Status != state.TaskPending || tk.Attempts != 0 || tk.AttemptEpoch != 0 {
			t.Fatalf("a stale owner's write landed: %+v (%v, %v)", tk, ok, err)
		}
	}
	if err := h.As("n2").Complete(ctx, shard, newEpoch, stale[:1]); err != nil {
		t.Fatalf("new owner's write: %v", err)
	}
	if tk, _, _ := h.Store.Task(ctx, tasks[0].ID); tk.Status != state.TaskSucceeded {
		t.Fatalf("new owner's ack did not land: %+v", tk)
	}
}
