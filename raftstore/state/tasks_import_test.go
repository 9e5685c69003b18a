package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func (x *taskFSM) importTasks(ts ...ImportedTask) []SubmitOutcome {
	x.t.Helper()
	r := x.apply(MsgImportTasks, ImportTasksCommand{CommandMeta: CommandMeta{At: t0.Add(2 * time.Hour)}, Tasks: ts}, "")
	mustOK(x.t, r)
	var out []SubmitOutcome
	if err := json.Unmarshal(r.Value, &out); err != nil {
		x.t.Fatal(err)
	}
	return out
}

// Imported tasks keep their ids and counters, are due at their next
// attempt on their shard and count as pending; an id or (namespace,
// request id) already stored, even by a delivered task, is a duplicate
// naming the stored task; a second import of the same batch adds nothing.
func TestImportTasks(t *testing.T) {
	x := newTaskFSM(t)
	delivered := newTaskFor("00000000000000000000000000000001", "ns", "wf-1", "rid-1")
	x.submit(t0, 0, delivered)
	owner, epoch := x.owner(delivered.Shard)
	if o := x.complete(delivered.Shard, owner, epoch, TaskResult{TaskID: delivered.ID, Status: TaskSucceeded, Attempts: 1}); o.Refused != nil {
		t.Fatalf("complete refused: %+v", o.Refused)
	}

	moved := newTaskFor("00000000000000000000000000000002", "ns", "wf-2", "rid-2")
	moved.Deadline = t0.Add(3 * time.Hour)
	plain := newTaskFor("00000000000000000000000000000003", "ns", "wf-3", "")
	sameID := newTaskFor(delivered.ID, "ns", "wf-9", "")
	sameRequest := newTaskFor("00000000000000000000000000000004", "ns", "wf-4", "rid-1")
	next := t0.Add(90 * time.Minute)
	batch := []ImportedTask{
		{NewTask: moved, Attempts: 7, NextAttemptAt: next, CreatedAt: t0.Add(-time.Hour)},
		{NewTask: plain, NextAttemptAt: t0, CreatedAt: t0},
		{NewTask: sameID, NextAttemptAt: t0, CreatedAt: t0},
		{NewTask: sameRequest, NextAttemptAt: t0, CreatedAt: t0},
	}
	want := []SubmitOutcome{
		{TaskID: moved.ID, Shard: moved.Shard, Outcome: SubmitAccepted},
		{TaskID: plain.ID, Shard: plain.Shard, Outcome: SubmitAccepted},
		{TaskID: delivered.ID, Shard: delivered.Shard, Outcome: SubmitDuplicate},
		{TaskID: delivered.ID, Shard: delivered.Shard, Outcome: SubmitDuplicate},
	}
	for round := range 2 {
		got := x.importTasks(batch...)
		for i := range want {
			w := want[i]
			if round == 1 && i < 2 {
				w.Outcome = SubmitDuplicate // the first round stored them
			}
			if got[i] != w {
				t.Fatalf("round %d item %d = %+v, want %+v", round, i, got[i], w)
			}
		}
	}

	row, ok := x.st.Task(moved.ID)
	switch {
	case !ok:
		t.Fatal("imported task not stored")
	case row.Status != TaskPending || row.Attempts != 7 || !row.NextAttemptAt.Equal(next) ||
		!row.CreatedAt.Equal(t0.Add(-time.Hour)) || !row.Deadline.Equal(moved.Deadline) ||
		row.ScheduleToClose != 4*time.Hour || row.RequestID != "rid-2":
		t.Fatalf("imported row %+v", row)
	}
	if r, ok := x.st.TaskByRequestID("ns", "rid-2"); !ok || r.ID != moved.ID {
		t.Fatalf("request id index: %+v, %v", r, ok)
	}
	backlog := 0 // the per-shard counters the submit's limits read
	for shard := range taskShards {
		backlog += x.st.TaskBacklog(shard)
	}
	if got := x.st.PendingTasks(); got != 2 || backlog != 2 {
		t.Fatalf("pending tasks = %d, shard backlogs %d, want 2", got, backlog)
	}
	if due, _, _ := x.st.ScanDue(moved.Shard, time.Time{}, next.Add(-time.Second), 10, nil); containsTask(due, moved.ID) {
		t.Fatal("imported task due before its next attempt")
	}
	if due, _, _ := x.st.ScanDue(moved.Shard, time.Time{}, next, 10, nil); !containsTask(due, moved.ID) {
		t.Fatal("imported task not due at its next attempt")
	}

	// A restored snapshot holds the same rows and counts.
	g := newTestFSM(t, StateOptions{})
	if err := g.Restore(bytes.NewReader(snapshotBytes(t, x.f))); err != nil {
		t.Fatal(err)
	}
	if r, ok := g.State().Task(moved.ID); !ok || r.Attempts != 7 || g.State().PendingTasks() != 2 {
		t.Fatalf("restored: %+v, %v, pending %d", r, ok, g.State().PendingTasks())
	}
}

// An import whose shard does not match this cluster's shard count, or
// with a bad counter, is refused whole: no row is written.
func TestImportTasksRefusedWhole(t *testing.T) {
	x := newTaskFSM(t)
	good := newTaskFor("00000000000000000000000000000005", "ns", "wf-5", "")
	wrongShard := newTaskFor("00000000000000000000000000000006", "ns", "wf-6", "")
	wrongShard.Shard = (wrongShard.Shard + 1) % taskShards
	for _, c := range []struct {
		name, field string
		second      ImportedTask
	}{
		{"shard", "tasks[1].shard", ImportedTask{NewTask: wrongShard, NextAttemptAt: t0, CreatedAt: t0}},
		{"attempts", "tasks[1].attempts", ImportedTask{NewTask: good, Attempts: -1, NextAttemptAt: t0, CreatedAt: t0}},
		{"created", "tasks[1].created_at", ImportedTask{NewTask: good, NextAttemptAt: t0}},
		{"next", "tasks[1].next_attempt_at", ImportedTask{NewTask: good, CreatedAt: t0}},
	} {
		r := x.apply(MsgImportTasks, ImportTasksCommand{CommandMeta: meta0, Tasks: []ImportedTask{
			{NewTask: good, NextAttemptAt: t0, CreatedAt: t0}, c.second}}, "")
		wantCode(t, r, CodeInvalidArgument, c.field)
		if _, ok := x.st.Task(good.ID); ok || x.st.PendingTasks() != 0 {
			t.Fatalf("%s: a refused import wrote a row", c.name)
		}
	}
}

func containsTask(ts []*Task, id string) bool {
	for _, t := range ts {
		if t.ID == id {
			return true
		}
	}
	return false
}

// A node built before LogVersionImportTasks halts on an import_tasks entry
// instead of skipping it; the proposers' gate keeps such entries out of its
// log.
func TestImportEntryHaltsAnOlderLogVersion(t *testing.T) {
	old := newTestFSM(t, StateOptions{LogVersion: LogVersionImportTasks - 1})
	cmd, err := EncodeCommand(MsgImportTasks, ImportTasksCommand{CommandMeta: meta0})
	if err != nil {
		t.Fatal(err)
	}
	old.Apply(1, EncodeEntry(cmd, ""))
	wantHalted(t, old, 1, "command type 23 (import_tasks", fmt.Sprintf("log version %d", LogVersionImportTasks-1))
}

// FuzzApplyImportTasks: arbitrary bytes as an import_tasks payload are
// refused or applied, never a panic or a halt, and what is applied keeps
// the pending counts the submit's limits read equal to the rows.
func FuzzApplyImportTasks(f *testing.F) {
	nt := newTaskFor("00000000000000000000000000000007", "ns", "wf-7", "rid-7")
	nt.Deadline = t0.Add(time.Hour)
	seed, err := EncodeCommand(MsgImportTasks, ImportTasksCommand{CommandMeta: meta0, Tasks: []ImportedTask{
		{NewTask: nt, Attempts: 2, NextAttemptAt: t0, CreatedAt: t0},
		{NewTask: nt, NextAttemptAt: t0, CreatedAt: t0},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed[1:])
	f.Add([]byte(`{"at":"2026-01-01T00:00:00Z","tasks":[{"id":"x"}]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		x := newTaskFSM(t)
		x.idx++
		r := x.f.Apply(x.idx, EncodeEntry(append([]byte{byte(MsgImportTasks)}, payload...), ""))
		if err := x.f.HaltErr(); err != nil {
			t.Fatalf("halted: %v", err)
		}
		backlog := 0
		for shard := range taskShards {
			backlog += x.st.TaskBacklog(shard)
		}
		if got := x.st.PendingTasks(); got != backlog {
			t.Fatalf("pending rows %d, shard backlogs %d", got, backlog)
		}
		if r.Err != nil {
			if backlog != 0 {
				t.Fatalf("a refused import wrote %d rows: %v", backlog, r.Err)
			}
			return
		}
		var out []SubmitOutcome
		if err := json.Unmarshal(r.Value, &out); err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if tk, ok := x.st.Task(o.TaskID); !ok || tk.Status != TaskPending {
				t.Fatalf("outcome %+v without its pending row", o)
			}
		}
	})
}
