package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/queue"
	"fusebox/raftstore/state"
)

// API is what the task routes, shard stats and retention need of a store
// beyond the queue's view (node's TaskAPI over either store).
type API interface {
	queue.BlockedStore
	queue.LaterStore
	// ListTasksPage lists in id order (state.TaskQuery), with the next
	// page's cursor: the last id when the page is full.
	ListTasksPage(ctx context.Context, q state.TaskQuery) ([]state.Task, string, error)
	// Redrive moves dead-lettered tasks (ids, or all) back to pending, due
	// at `at`.
	Redrive(ctx context.Context, ids []string, all bool, at time.Time) (state.RedriveOutcome, error)
	// DestinationBacklog and PendingTasks are the counts the submit limits
	// apply to.
	DestinationBacklog(ctx context.Context, namespace, destination string) int
	PendingTasks(ctx context.Context) int
	// ShardStats is a shard's backlog and its oldest pending task's
	// creation time (zero: none).
	ShardStats(ctx context.Context, shard int) (backlog int, oldest time.Time, err error)
	// Collect deletes succeeded and failed tasks completed before `before`.
	Collect(ctx context.Context, before time.Time, limit int) (deleted int, more bool, err error)
}

func ids(ts []state.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func testListPages(t *testing.T, h Harness) {
	ctx := t.Context()
	var tasks []state.NewTask
	for i := range 7 {
		tasks = append(tasks, newTask(h, "ns", fmt.Sprint("wf-", i), "", i))
	}
	submit(t, h, tasks...)
	var got []string
	after := ""
	for range 10 {
		page, next, err := h.Store.ListTasksPage(ctx, state.TaskQuery{Limit: 3, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("page of %d, limit 3", len(page))
		}
		got = append(got, ids(page)...)
		if next == "" {
			break
		}
		after = next
	}
	want := make([]string, len(tasks))
	for i, nt := range tasks {
		want[i] = nt.ID
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	shard := tasks[0].Shard
	page, _, err := h.Store.ListTasksPage(ctx, state.TaskQuery{Limit: 100, Shard: &shard})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range page {
		if tk.Shard != shard {
			t.Fatalf("shard filter returned shard %d", tk.Shard)
		}
	}
	// Status filters: one dead-lettered, one blocked.
	epoch := h.Epoch(shard)
	var dlq, blocked string
	for _, nt := range tasks {
		if nt.Shard != shard {
			continue
		}
		switch {
		case dlq == "":
			dlq = nt.ID
		case blocked == "":
			blocked = nt.ID
		}
	}
	res := []queue.Result{{TaskID: dlq, Status: queue.StatusDLQ, Message: "poison"}}
	if blocked != "" {
		res = append(res, queue.Result{TaskID: blocked, Status: queue.StatusPending, Blocked: 1, NextAttemptAt: time.Now().Add(time.Hour)})
	}
	if err := h.Store.Complete(ctx, shard, epoch, res); err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string]string{state.TaskDLQ: dlq, state.TaskStatusBlocked: blocked} {
		if want == "" {
			continue
		}
		page, next, err := h.Store.ListTasksPage(ctx, state.TaskQuery{Limit: 10, Status: status})
		if err != nil || len(page) != 1 || page[0].ID != want || next != "" {
			t.Fatalf("status %s: %v next %q err %v, want [%s]", status, ids(page), next, err, want)
		}
	}
}

func testRedrive(t *testing.T, h Harness) {
	ctx := t.Context()
	a, b, c := newTask(h, "ns", "r", "", 0), newTask(h, "ns", "r", "", 1), newTask(h, "ns", "r", "", 2)
	a.Deadline = time.Now().Add(time.Minute)
	submit(t, h, a, b, c)
	shard := a.Shard
	if err := h.Store.Complete(ctx, shard, h.Epoch(shard), []queue.Result{
		{TaskID: a.ID, Status: queue.StatusDLQ, Attempts: 5, Message: "poison"},
		{TaskID: b.ID, Status: queue.StatusDLQ, Attempts: 3, Message: "poison"},
		{TaskID: c.ID, Status: queue.StatusSucceeded, Attempts: 1},
	}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	out, err := h.Store.Redrive(ctx, []string{a.ID, c.ID, "0000000000000000unknown"}, false, at)
	if err != nil || !slices.Equal(out.Redriven, []string{a.ID}) || out.More {
		t.Fatalf("redrive ids = %+v, %v; want only the dead-lettered %s", out, err, a.ID)
	}
	tk, _, _ := h.Store.Task(ctx, a.ID)
	if tk.Status != state.TaskPending || tk.Attempts != 0 || !tk.NextAttemptAt.Equal(at) || !tk.CompletedAt.IsZero() ||
		tk.Deadline.Sub(at) != tk.ScheduleToClose || tk.ScheduleToClose <= 0 {
		t.Fatalf("redriven task = %+v", tk)
	}
	if n := h.Store.Backlog(shard); n != 1 {
		t.Fatalf("backlog after redrive = %d, want 1", n)
	}
	out, err = h.Store.Redrive(ctx, nil, true, at)
	if err != nil || !slices.Equal(out.Redriven, []string{b.ID}) {
		t.Fatalf("redrive all = %+v, %v; want [%s]", out, err, b.ID)
	}
	if page, _, _ := h.Store.ListTasksPage(ctx, state.TaskQuery{Limit: 10, Status: state.TaskDLQ}); len(page) != 0 {
		t.Fatalf("DLQ after redrive all: %v", ids(page))
	}
	if tk, _, _ := h.Store.Task(ctx, c.ID); tk.Status != state.TaskSucceeded {
		t.Fatalf("a succeeded task was redriven: %+v", tk)
	}
}

func testSubmitLimits(t *testing.T, h Harness) {
	ctx := t.Context()
	limited := func(wf, rid string, i, perDest, pending int) state.NewTask {
		nt := newTask(h, "ns", wf, rid, i)
		nt.MaxDestinationBacklog, nt.MaxPendingTasks = perDest, pending
		return nt
	}
	// Destination cap 2: the third task of the batch is refused, a task
	// with a request id already stored is still its duplicate.
	first := limited("a", "rid-1", 0, 2, 0)
	out := submit(t, h, first, limited("b", "", 1, 2, 0), limited("c", "", 2, 2, 0), limited("d", "rid-1", 3, 2, 0))
	if out[0].Outcome != state.SubmitAccepted || out[1].Outcome != state.SubmitAccepted ||
		out[2].Outcome != state.SubmitOverloaded || out[2].Reason != state.OverloadDestination ||
		out[3].Outcome != state.SubmitDuplicate || out[3].TaskID != first.ID {
		t.Fatalf("outcomes = %+v", out)
	}
	if n := h.Store.DestinationBacklog(ctx, "ns", first.DestinationKey); n != 2 {
		t.Fatalf("destination backlog = %d, want 2", n)
	}
	// Another destination is not held back by the full one.
	other := limited("e", "", 4, 2, 0)
	other.DestinationKey = "http://127.0.0.1:10"
	if out := submit(t, h, other); out[0].Outcome != state.SubmitAccepted {
		t.Fatalf("other destination refused: %+v", out)
	}
	// The pending ceiling (3 stored).
	if n := h.Store.PendingTasks(ctx); n != 3 {
		t.Fatalf("pending = %d, want 3", n)
	}
	p := limited("f", "", 5, 0, 3)
	p.DestinationKey = "http://127.0.0.1:11"
	if out := submit(t, h, p); out[0].Outcome != state.SubmitOverloaded || out[0].Reason != state.OverloadPending {
		t.Fatalf("over the pending ceiling: %+v", out)
	}
	if _, ok, _ := h.Store.Task(ctx, p.ID); ok {
		t.Fatal("a refused task was stored")
	}
}

func testStatsCollect(t *testing.T, h Harness) {
	ctx := t.Context()
	a, b := newTask(h, "ns", "s", "", 0), newTask(h, "ns", "s", "", 1)
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	if _, err := h.Store.Submit(ctx, []state.NewTask{a, b}, at); err != nil {
		t.Fatal(err)
	}
	n, oldest, err := h.Store.ShardStats(ctx, a.Shard)
	if err != nil || n != 2 || !oldest.Equal(at) {
		t.Fatalf("stats = %d %v %v, want 2 %v", n, oldest, err, at)
	}
	if err := h.Store.Complete(ctx, a.Shard, h.Epoch(a.Shard), []queue.Result{
		{TaskID: a.ID, Status: queue.StatusSucceeded, Attempts: 1},
		{TaskID: b.ID, Status: queue.StatusDLQ, Attempts: 1},
	}); err != nil {
		t.Fatal(err)
	}
	if n, oldest, err := h.Store.ShardStats(ctx, a.Shard); err != nil || n != 0 || !oldest.IsZero() {
		t.Fatalf("stats after completion = %d %v %v", n, oldest, err)
	}
	if d, _, err := h.Store.Collect(ctx, time.Now().Add(-time.Hour), 10); err != nil || d != 0 {
		t.Fatalf("collect before completion deleted %d (%v)", d, err)
	}
	d, more, err := h.Store.Collect(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || d != 1 || more {
		t.Fatalf("collect = %d %v %v, want the succeeded task only", d, more, err)
	}
	if _, ok, _ := h.Store.Task(ctx, a.ID); ok {
		t.Fatal("succeeded task not collected")
	}
	if _, ok, _ := h.Store.Task(ctx, b.ID); !ok {
		t.Fatal("dead-lettered task collected")
	}
}

func testBlocked(t *testing.T, h Harness) {
	ctx := t.Context()
	var tasks []state.NewTask
	for i := range 5 {
		tasks = append(tasks, newTask(h, "ns", "blk", "", i))
	}
	submit(t, h, tasks...)
	shard := tasks[0].Shard
	later := time.Now().Add(time.Hour)
	var res []queue.Result
	for i, nt := range tasks[:4] {
		res = append(res, queue.Result{TaskID: nt.ID, Status: queue.StatusPending, Blocked: 1, NextAttemptAt: later.Add(time.Duration(i) * time.Second)})
	}
	if err := h.Store.Complete(ctx, shard, h.Epoch(shard), res); err != nil {
		t.Fatal(err)
	}
	k := breakerpool.Key{TaskGroup: tasks[0].TaskGroup, NamespaceID: "ns", Destination: tasks[0].DestinationKey}
	got := walkPages(queue.Cursor{}, func(cur queue.Cursor) ([]queue.Task, queue.Cursor, bool) {
		return h.Store.Blocked(shard, k, cur, 2, func(id string) bool { return id == tasks[1].ID })
	})
	want := []string{tasks[0].ID, tasks[2].ID, tasks[3].ID}
	if !slices.Equal(got, want) {
		t.Fatalf("blocked = %v, want %v (the unblocked and skipped ones left out)", got, want)
	}
	other := k
	other.NamespaceID = "other"
	if page, _, _ := h.Store.Blocked(shard, other, queue.Cursor{}, 10, nil); len(page) != 0 {
		t.Fatalf("another key's walk returned %d tasks", len(page))
	}
}

// testBlockedSparse: a key's few blocked tasks behind more of the shard's
// pending rows than a store may examine in one read (raftstore bounds a
// read to state.MaxBlockedScan rows: its pages then end short, with no
// task, their cursor the last row examined). Walking page after page from
// each one's cursor finds every blocked task of the key, once.
func testBlockedSparse(t *testing.T, h Harness) {
	const bulk, batch = 1_100, 550
	ctx := t.Context()
	var others []state.NewTask
	for i := range bulk { // another destination, same shard
		nt := newTask(h, "ns", "sparse", "", i)
		nt.Destination, nt.DestinationKey = "http://127.0.0.1:8/cb", "http://127.0.0.1:8"
		others = append(others, nt)
	}
	for i := 0; i < bulk; i += batch {
		submit(t, h, others[i:i+batch]...)
	}
	var tasks []state.NewTask
	for i := range 3 {
		tasks = append(tasks, newTask(h, "ns", "sparse", "", bulk+i))
	}
	submit(t, h, tasks...)
	shard := tasks[0].Shard
	later := time.Now().Add(time.Hour)
	var res []queue.Result
	for i, nt := range tasks {
		res = append(res, queue.Result{TaskID: nt.ID, Status: queue.StatusPending, Blocked: 1, NextAttemptAt: later.Add(time.Duration(i) * time.Second)})
	}
	if err := h.Store.Complete(ctx, shard, h.Epoch(shard), res); err != nil {
		t.Fatal(err)
	}
	k := breakerpool.Key{TaskGroup: tasks[0].TaskGroup, NamespaceID: "ns", Destination: tasks[0].DestinationKey}
	got := walkPages(queue.Cursor{}, func(cur queue.Cursor) ([]queue.Task, queue.Cursor, bool) {
		return h.Store.Blocked(shard, k, cur, 10, nil)
	})
	if want := []string{tasks[0].ID, tasks[1].ID, tasks[2].ID}; !slices.Equal(got, want) {
		t.Fatalf("blocked behind %d other rows = %v, want %v", bulk, got, want)
	}
}

// testLater: a key's pending tasks after a cursor and up to a due time,
// blocked or not, in due order and paged, the skipped ones left out.
func testLater(t *testing.T, h Harness) {
	ctx := t.Context()
	var tasks []state.NewTask
	for i := range 6 {
		tasks = append(tasks, newTask(h, "ns", "later", "", i))
	}
	submit(t, h, tasks...)
	shard := tasks[0].Shard
	now := time.Now()
	later := now.Add(time.Hour)
	var res []queue.Result
	for i, nt := range tasks[:5] {
		r := queue.Result{TaskID: nt.ID, Status: queue.StatusPending, NextAttemptAt: later.Add(time.Duration(i) * time.Second)}
		if i == 2 {
			r.Blocked = 1
		}
		res = append(res, r)
	}
	if err := h.Store.Complete(ctx, shard, h.Epoch(shard), res); err != nil {
		t.Fatal(err)
	}
	k := breakerpool.Key{TaskGroup: tasks[0].TaskGroup, NamespaceID: "ns", Destination: tasks[0].DestinationKey}
	until := later.Add(3 * time.Second)
	got := walkPages(queue.Cursor{At: now}, func(cur queue.Cursor) ([]queue.Task, queue.Cursor, bool) {
		return h.Store.Later(shard, k, cur, until, 2, func(id string) bool { return id == tasks[1].ID })
	})
	// tasks[5] is due now (before the cursor), tasks[4] after until.
	want := []string{tasks[0].ID, tasks[2].ID, tasks[3].ID}
	if !slices.Equal(got, want) {
		t.Fatalf("later = %v, want %v", got, want)
	}
	other := k
	other.NamespaceID = "other"
	if page, _, _ := h.Store.Later(shard, other, queue.Cursor{At: now}, until, 10, nil); len(page) != 0 {
		t.Fatalf("another key's walk returned %d tasks", len(page))
	}
}

// walkPages follows a paged walk from cur to its end (at most 10 pages) and
// returns the ids it found.
func walkPages(cur queue.Cursor, page func(queue.Cursor) ([]queue.Task, queue.Cursor, bool)) []string {
	var got []string
	for range 10 {
		tasks, last, done := page(cur)
		for _, tk := range tasks {
			got = append(got, tk.ID)
		}
		if done {
			break
		}
		cur = last
	}
	return got
}
