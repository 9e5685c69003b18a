package state

import (
	"testing"
	"time"
)

// A task's schedule-to-close deadline is fixed at submit and kept in the
// row; no retry is scheduled after it (a later NextAttemptAt is clamped to
// it, on every replica alike); a redrive starts the timeout again from the
// redrive's time.
func TestTaskDeadlineClampsRetriesAndRestartsOnRedrive(t *testing.T) {
	x := newTaskFSM(t)
	nt := newTaskFor("dl", "ns", "wf", "")
	nt.Deadline = t0.Add(30 * time.Minute)
	plain := newTaskFor("plain", "ns", "wf2", "")
	x.submit(t0, 0, nt, plain)
	got, _ := x.st.Task("dl")
	if !got.Deadline.Equal(nt.Deadline) || got.ScheduleToClose != 30*time.Minute {
		t.Fatalf("row deadline %v, timeout %v", got.Deadline, got.ScheduleToClose)
	}
	owner, epoch := x.owner(nt.Shard)
	x.complete(nt.Shard, owner, epoch, TaskResult{TaskID: "dl", Status: TaskPending, Attempts: 1, NextAttemptAt: t0.Add(time.Hour)})
	if got, _ := x.st.Task("dl"); !got.NextAttemptAt.Equal(nt.Deadline) {
		t.Fatalf("next attempt %v; want clamped to the deadline %v", got.NextAttemptAt, nt.Deadline)
	}
	owner2, epoch2 := x.owner(plain.Shard)
	x.complete(plain.Shard, owner2, epoch2, TaskResult{TaskID: "plain", Status: TaskPending, Attempts: 1, NextAttemptAt: t0.Add(time.Hour)})
	if got, _ := x.st.Task("plain"); !got.NextAttemptAt.Equal(t0.Add(time.Hour)) || !got.Deadline.IsZero() {
		t.Fatalf("a task without a deadline: %+v", got)
	}

	x.complete(nt.Shard, owner, epoch, TaskResult{TaskID: "dl", Status: TaskDLQ, Attempts: 1, Unexpected: 70, Message: "poison"})
	at := t0.Add(48 * time.Hour)
	mustOK(t, x.apply(MsgRedriveTasks, RedriveTasksCommand{CommandMeta: CommandMeta{At: at}, IDs: []string{"dl"}}, ""))
	got, _ = x.st.Task("dl")
	if got.Status != TaskPending || !got.Deadline.Equal(at.Add(30*time.Minute)) || got.ScheduleToClose != 30*time.Minute {
		t.Fatalf("redriven: %s, deadline %v (timeout %v); want pending until %v", got.Status, got.Deadline, got.ScheduleToClose, at.Add(30*time.Minute))
	}
}
