package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// cbTask is a callback task to url whose breaker destination is key.
func cbTask(id, ns, wf, url, key string) NewTask {
	nt := newTaskFor(id, ns, wf, "")
	nt.Destination, nt.DestinationKey = url, key
	nt.Request = json.RawMessage(`{"task_group":"callbacks.Invocation","url":"` + url + `"}`)
	return nt
}

func withLimits(nt NewTask, perDest, total int) NewTask {
	nt.MaxDestinationBacklog, nt.MaxPendingTasks = perDest, total
	return nt
}

// One destination over its cap refuses only its own tasks: another
// destination, and the same destination in another namespace, are accepted
// in the same batch; two callback paths on one host count together.
func TestSubmitTasksDestinationBacklog(t *testing.T) {
	x := newTaskFSM(t)
	const a, b = "http://a.example:1", "http://b.example:1"
	out := x.submit(t0, 0,
		withLimits(cbTask("a1", "ns", "w1", a+"/cb", a), 2, 0),
		withLimits(cbTask("a2", "ns", "w2", a+"/other?x=1", a), 2, 0),
		withLimits(cbTask("a3", "ns", "w3", a+"/cb", a), 2, 0),
		withLimits(cbTask("b1", "ns", "w4", b+"/cb", b), 2, 0),
		withLimits(cbTask("a4", "ns2", "w5", a+"/cb", a), 2, 0),
	)
	want := []string{SubmitAccepted, SubmitAccepted, SubmitOverloaded, SubmitAccepted, SubmitAccepted}
	for i, o := range out {
		if o.Outcome != want[i] {
			t.Fatalf("outcome %d = %+v, want %s (all: %+v)", i, o, want[i], out)
		}
	}
	if out[2].Reason != OverloadDestination {
		t.Fatalf("reason = %q, want %q", out[2].Reason, OverloadDestination)
	}
	if _, ok := x.st.Task("a3"); ok {
		t.Fatal("overloaded task inserted")
	}
	if n := x.st.DestinationBacklog("ns", a); n != 2 {
		t.Fatalf("DestinationBacklog(ns, a) = %d, want 2", n)
	}
	if n := x.st.PendingTasks(); n != 4 {
		t.Fatalf("PendingTasks = %d, want 4", n)
	}
	// A retry (pending → pending) keeps the count; a terminal result frees
	// a slot.
	a1, _ := x.st.Task("a1")
	owner, epoch := x.owner(a1.Shard)
	x.complete(a1.Shard, owner, epoch, TaskResult{TaskID: "a1", Status: TaskPending, Blocked: 2, NextAttemptAt: t0.Add(time.Minute)})
	if n := x.st.DestinationBacklog("ns", a); n != 2 {
		t.Fatalf("after a retry DestinationBacklog = %d, want 2", n)
	}
	x.complete(a1.Shard, owner, epoch, TaskResult{TaskID: "a1", Status: TaskSucceeded, Attempts: 1})
	if n := x.st.DestinationBacklog("ns", a); n != 1 {
		t.Fatalf("after success DestinationBacklog = %d, want 1", n)
	}
	if o := x.submit(t0, 0, withLimits(cbTask("a5", "ns", "w6", a+"/cb", a), 2, 0)); o[0].Outcome != SubmitAccepted {
		t.Fatalf("after a slot freed: %+v", o)
	}
	// The node-wide ceiling refuses every destination alike.
	total := x.st.PendingTasks()
	o := x.submit(t0, 0, withLimits(cbTask("c1", "ns", "w7", "http://c.example/cb", "http://c.example"), 0, total))
	if o[0].Outcome != SubmitOverloaded || o[0].Reason != OverloadPending {
		t.Fatalf("over the pending ceiling: %+v", o)
	}
	if o := x.submit(t0, 0, withLimits(cbTask("c2", "ns", "w7", "http://c.example/cb", "http://c.example"), 0, total+1)); o[0].Outcome != SubmitAccepted {
		t.Fatalf("under the pending ceiling: %+v", o)
	}
	// A row whose key equals its destination stores no key; a row without
	// a key (written before keys existed) counts under its destination.
	if tk, _ := x.st.Task("b1"); tk.DestinationKey != b {
		t.Fatalf("b1 key = %q", tk.DestinationKey)
	}
	nk := newTaskFor("n1", "ns", "w8", "")
	x.submit(t0, 0, nk)
	if n := x.st.DestinationBacklog("ns", nk.Destination); n != 1 {
		t.Fatalf("keyless row counted %d under its destination, want 1", n)
	}

	// The counts are derived from the rows: a restored replica has the
	// same ones.
	data := snapshotBytes(t, x.f)
	dst := newTestFSM(t, StateOptions{})
	if err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ ns, d string }{{"ns", a}, {"ns", b}, {"ns2", a}, {"ns", "http://c.example"}, {"ns", nk.Destination}} {
		if x, y := x.st.DestinationBacklog(k.ns, k.d), dst.State().DestinationBacklog(k.ns, k.d); x != y {
			t.Fatalf("%v: %d before, %d restored", k, x, y)
		}
	}
	if x, y := x.st.PendingTasks(), dst.State().PendingTasks(); x != y {
		t.Fatalf("PendingTasks %d before, %d restored", x, y)
	}
}

func TestSubmitTasksLimitValidation(t *testing.T) {
	x := newTaskFSM(t)
	bad := withLimits(newTaskFor("x", "ns", "w", ""), -1, 0)
	wantCode(t, x.apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{bad}}, ""), CodeInvalidArgument, "tasks[0].max_destination_backlog")
	bad = withLimits(newTaskFor("x", "ns", "w", ""), 0, -1)
	wantCode(t, x.apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{bad}}, ""), CodeInvalidArgument, "tasks[0].max_pending_tasks")
	bad = newTaskFor("x", "ns", "w", "")
	bad.DestinationKey = "bad\x01key"
	wantCode(t, x.apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{bad}}, ""), CodeInvalidArgument, "tasks[0].destination_key")
}

// ScanBlocked walks one shard's blocked tasks in due order, with a cursor,
// a match and a skip; the blocked status filter lists the same tasks.
// ScanPending walks every pending task of the match up to a due time.
func TestScanBlockedAndBlockedListing(t *testing.T) {
	x := newTaskFSM(t)
	const a, b = "http://a.example", "http://b.example"
	x.submit(t0, 0, cbTask("a1", "ns", "w", a+"/1", a), cbTask("a2", "ns", "w", a+"/2", a),
		cbTask("a3", "ns", "w", a+"/3", a), cbTask("b1", "ns", "w", b+"/1", b))
	a1, _ := x.st.Task("a1")
	shard := a1.Shard
	owner, epoch := x.owner(shard)
	x.complete(shard, owner, epoch,
		TaskResult{TaskID: "a1", Status: TaskPending, Blocked: 2, NextAttemptAt: t0.Add(3 * time.Minute)},
		TaskResult{TaskID: "a2", Status: TaskPending, Blocked: 3, NextAttemptAt: t0.Add(1 * time.Minute)},
		TaskResult{TaskID: "a3", Status: TaskPending, Attempts: 1, NextAttemptAt: t0.Add(2 * time.Minute)}, // down, not blocked
		TaskResult{TaskID: "b1", Status: TaskPending, Blocked: 2, NextAttemptAt: t0.Add(time.Minute)})
	onA := func(t *Task) bool { return t.destination() == a }
	ids := func(ts []*Task) (out []string) {
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	got, _, _, done := x.st.ScanBlocked(shard, time.Time{}, "", 10, onA, nil)
	if g := ids(got); !done || len(g) != 2 || g[0] != "a2" || g[1] != "a1" {
		t.Fatalf("ScanBlocked = %v done=%v, want [a2 a1] done", g, done)
	}
	got, _, _, done = x.st.ScanBlocked(shard, time.Time{}, "", 1, onA, nil)
	if g := ids(got); done || len(g) != 1 || g[0] != "a2" {
		t.Fatalf("first page = %v done=%v", g, done)
	}
	got, _, _, done = x.st.ScanBlocked(shard, got[0].NextAttemptAt, got[0].ID, 1, onA, nil)
	if g := ids(got); len(g) != 1 || g[0] != "a1" {
		t.Fatalf("second page = %v done=%v", g, done)
	}
	got, _, _, _ = x.st.ScanBlocked(shard, time.Time{}, "", 10, onA, func(id string) bool { return id == "a2" })
	if g := ids(got); len(g) != 1 || g[0] != "a1" {
		t.Fatalf("with a2 skipped = %v", g)
	}
	// ScanPending: every pending task of the match, blocked or not, after
	// the cursor and due no later than until.
	got, done = x.st.ScanPending(shard, t0.Add(90*time.Second), "", t0.Add(150*time.Second), 10, onA, nil)
	if g := ids(got); !done || len(g) != 1 || g[0] != "a3" {
		t.Fatalf("ScanPending(90s, 150s] = %v done=%v, want [a3] done", g, done)
	}
	got, done = x.st.ScanPending(shard, t0.Add(time.Minute), "a2", t0.Add(3*time.Minute), 1, onA, nil)
	if g := ids(got); done || len(g) != 1 || g[0] != "a3" {
		t.Fatalf("ScanPending after a2, limit 1 = %v done=%v, want [a3] not done", g, done)
	}
	var listed []string
	for _, tk := range x.st.ListTasks(TaskQuery{Status: TaskStatusBlocked, Limit: 100}) {
		listed = append(listed, tk.ID)
	}
	if len(listed) != 3 || listed[0] != "a1" || listed[1] != "a2" || listed[2] != "b1" {
		t.Fatalf("blocked listing = %v, want [a1 a2 b1]", listed)
	}
}

// ScanBlocked examines at most its row budget per call and says where to
// resume: a key with few blocked tasks among many other rows is walked in
// bounded pages (the queue's release walk holds its shard's mutex for one),
// and resuming from each page's position finds every blocked task of the
// key, in due order, none twice.
func TestScanBlockedResumesAtItsRowBudget(t *testing.T) {
	defer func(b int) { blockedScanBudget = b }(blockedScanBudget)
	blockedScanBudget = 3
	x := newTaskFSM(t)
	const a, b = "http://a.example", "http://b.example"
	var submitted []NewTask
	for i := range 12 {
		id, dest := fmt.Sprintf("t%02d", i), b
		if i == 1 || i == 7 || i == 11 {
			dest = a
		}
		submitted = append(submitted, cbTask(id, "ns", "w", dest+"/cb", dest))
	}
	x.submit(t0, 0, submitted...)
	first, _ := x.st.Task("t00")
	shard := first.Shard
	owner, epoch := x.owner(shard)
	var res []TaskResult
	for i := range 12 { // every row blocked, due in id order
		res = append(res, TaskResult{TaskID: fmt.Sprintf("t%02d", i), Status: TaskPending, Blocked: 1, NextAttemptAt: t0.Add(time.Duration(i+1) * time.Second)})
	}
	x.complete(shard, owner, epoch, res...)
	onA := func(t *Task) bool { return t.destination() == a }

	var got []string
	at, id, calls := time.Time{}, "", 0
	for done := false; !done; calls++ {
		if calls > 12 {
			t.Fatal("the walk does not end")
		}
		var page []*Task
		var nextAt time.Time
		var nextID string
		page, nextAt, nextID, done = x.st.ScanBlocked(shard, at, id, 10, onA, nil)
		if !done && len(page) == 0 && nextID == id {
			t.Fatalf("a page stopped short at (%v, %q) without moving on", nextAt, nextID)
		}
		for _, tk := range page {
			got = append(got, tk.ID)
		}
		at, id = nextAt, nextID
	}
	if want := []string{"t01", "t07", "t11"}; !slices.Equal(got, want) {
		t.Fatalf("walk = %v, want %v", got, want)
	}
	if calls < 12/3 {
		t.Fatalf("%d calls over 12 rows at a budget of 3: the budget did not bound a call", calls)
	}
	// The first page stops at the budget: one match in its three rows.
	page, nextAt, nextID, done := x.st.ScanBlocked(shard, time.Time{}, "", 10, onA, nil)
	if done || len(page) != 1 || page[0].ID != "t01" || nextID != "t02" || !nextAt.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("first page = %d tasks, next (%v, %q), done %v; want [t01], next t02, not done", len(page), nextAt, nextID, done)
	}
}
