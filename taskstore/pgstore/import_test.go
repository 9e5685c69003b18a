package pgstore

import (
	"fmt"
	"testing"
	"time"

	"fusebox/raftstore/state"
)

// Import keeps each task's id, attempts, next attempt, creation time and
// deadline (its schedule-to-close timeout derived for a redrive); a second
// import of the same tasks adds nothing and names the stored tasks; a task
// whose (namespace, request id) is stored under another id is a duplicate
// of that one; the same id twice in one import is inserted once; the
// imported tasks are due to the reader at their next attempt.
func TestImport(t *testing.T) {
	s := openTest(t)
	now := micro(time.Now())
	created := now.Add(-time.Hour)
	mk := func(i int, rid string) Imported {
		return Imported{
			NewTask: state.NewTask{
				ID: fmt.Sprintf("%032x", 1000+i), Shard: i % 4, NamespaceID: "ns", WorkflowID: fmt.Sprintf("wf-%d", i),
				TaskGroup: "callbacks.Invocation", Destination: "https://example.com/cb", RequestID: rid,
				Request:  []byte(`{"task_group":"callbacks.Invocation","header":{"Authorization":"Bearer x"}}`),
				Deadline: created.Add(48 * time.Hour),
			},
			Attempts: i + 3, NextAttemptAt: now.Add(time.Duration(i) * time.Second), CreatedAt: created,
		}
	}
	tasks := []Imported{mk(0, "rid-0"), mk(1, ""), mk(2, "rid-2"), mk(1, "")}
	out, err := s.Import(t.Context(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{state.SubmitAccepted, state.SubmitAccepted, state.SubmitAccepted, state.SubmitDuplicate}
	for i, o := range out {
		if o.Outcome != want[i] || o.TaskID != tasks[i].ID {
			t.Fatalf("outcome %d = %+v, want %s of %s", i, o, want[i], tasks[i].ID)
		}
	}
	for _, it := range tasks[:3] {
		got, ok, err := s.Task(t.Context(), it.ID)
		if err != nil || !ok {
			t.Fatalf("task %s: %v %v", it.ID, ok, err)
		}
		if got.Status != state.TaskPending || got.Attempts != it.Attempts || !got.NextAttemptAt.Equal(it.NextAttemptAt) ||
			!got.CreatedAt.Equal(it.CreatedAt) || !got.Deadline.Equal(it.Deadline) || got.ScheduleToClose != 48*time.Hour ||
			got.RequestID != it.RequestID || string(got.Request) != string(it.Request) || got.Shard != it.Shard {
			t.Fatalf("stored %+v\nimported %+v", got, it)
		}
	}

	// Run again: all duplicates of themselves. A task with another id but
	// a stored (namespace, request id): a duplicate of the stored task.
	other := mk(9, "rid-2")
	out, err = s.Import(t.Context(), append(tasks[:3:3], other))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		wantID := tasks[min(i, 2)].ID
		if o.Outcome != state.SubmitDuplicate || o.TaskID != wantID {
			t.Fatalf("second import %d = %+v, want a duplicate of %s", i, o, wantID)
		}
	}
	if n := s.PendingTasks(t.Context()); n != 3 {
		t.Fatalf("%d pending tasks, want 3", n)
	}
	// The reader finds them at their next attempt.
	due, _, _ := s.Due(0, time.Time{}, now.Add(time.Minute), 10, func(string) bool { return false })
	if len(due) != 1 || due[0].ID != tasks[0].ID {
		t.Fatalf("due on shard 0 = %+v", due)
	}
}
