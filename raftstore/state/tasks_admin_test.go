package state

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The task table's operator-facing operations: the DLQ and redrive,
// retention (collect) and the listing filters. tasks_test.go has the
// submit/due/complete lifecycle and the harness (taskFSM) these use.

func TestDLQAndRedrive(t *testing.T) {
	x := newTaskFSM(t)
	var shards []int
	for i, id := range []string{"d1", "d2", "d3"} {
		nt := newTaskFor(id, "ns", fmt.Sprintf("w%d", i), "")
		shards = append(shards, nt.Shard)
		x.submit(t0, 0, nt)
		owner, epoch := x.owner(nt.Shard)
		x.complete(nt.Shard, owner, epoch, TaskResult{TaskID: id, Status: TaskDLQ, Attempts: 3, Unexpected: 5, Message: "poison"})
	}
	dlq := x.st.ListTasks(TaskQuery{Status: TaskDLQ, Limit: 10})
	if len(dlq) != 3 || dlq[0].ID != "d1" || dlq[0].Message != "poison" {
		t.Fatalf("dlq = %+v", dlq)
	}
	for i, sh := range shards { // dead-lettered: kept on their shard, out of its backlog
		if dlq[i].Shard != sh || x.st.TaskBacklog(sh) != 0 {
			t.Fatalf("dlq task %s on shard %d (submitted to %d), shard backlog %d; want its shard and 0", dlq[i].ID, dlq[i].Shard, sh, x.st.TaskBacklog(sh))
		}
	}
	if page := x.st.ListTasks(TaskQuery{Status: TaskDLQ, After: "d1", Limit: 1}); len(page) != 1 || page[0].ID != "d2" {
		t.Fatalf("dlq page after d1 = %+v", page)
	}
	wantCode(t, x.apply(MsgRedriveTasks, RedriveTasksCommand{CommandMeta: meta0}, ""), CodeInvalidArgument, "ids")

	at := t0.Add(2 * time.Hour)
	r := x.apply(MsgRedriveTasks, RedriveTasksCommand{CommandMeta: CommandMeta{At: at}, IDs: []string{"d2", "d2", "missing"}}, "")
	mustOK(t, r)
	var ro RedriveOutcome
	_ = json.Unmarshal(r.Value, &ro)
	if !cmp.Equal(ro.Redriven, []string{"d2"}) {
		t.Fatalf("redrive = %+v", ro)
	}
	tk, _ := x.st.Task("d2")
	if tk.Status != TaskPending || tk.Attempts != 0 || tk.Unexpected != 0 || !tk.NextAttemptAt.Equal(at) || !tk.CompletedAt.IsZero() || x.st.TaskBacklog(tk.Shard) < 1 {
		t.Fatalf("redriven task = %+v", tk)
	}
	if due, _, _ := x.st.ScanDue(tk.Shard, time.Time{}, at, 10, nil); len(due) != 1 || due[0].ID != "d2" {
		t.Fatalf("redriven task not due: %+v", due)
	}
	r = x.apply(MsgRedriveTasks, RedriveTasksCommand{CommandMeta: CommandMeta{At: at}, All: true}, "")
	mustOK(t, r)
	ro = RedriveOutcome{}
	_ = json.Unmarshal(r.Value, &ro)
	if !cmp.Equal(ro.Redriven, []string{"d1", "d3"}) || ro.More {
		t.Fatalf("redrive all = %+v", ro)
	}
	if n := len(x.st.ListTasks(TaskQuery{Status: TaskDLQ, Limit: 10})); n != 0 {
		t.Fatalf("%d tasks left in the DLQ", n)
	}
	total := 0
	for s := range taskShards {
		total += x.st.TaskBacklog(s)
	}
	if total != 3 {
		t.Fatalf("backlog after redrive = %d, want 3", total)
	}
}

func TestCollectTasksByCutoff(t *testing.T) {
	x := newTaskFSM(t)
	for i, st := range []string{TaskSucceeded, TaskFailed, TaskDLQ, TaskSucceeded} {
		id := fmt.Sprintf("c%d", i)
		nt := newTaskFor(id, "ns", fmt.Sprintf("w%d", i), "")
		x.submit(t0, 0, nt)
		owner, epoch := x.owner(nt.Shard)
		r := x.apply(MsgCompleteTasks, CompleteTasksCommand{CommandMeta: CommandMeta{At: t0.Add(time.Duration(i) * time.Hour)},
			Shard: nt.Shard, Epoch: epoch, Node: owner, Results: []TaskResult{{TaskID: id, Status: st, Attempts: 1}}}, "")
		mustOK(t, r)
	}
	x.submit(t0, 0, newTaskFor("p", "ns", "pending", ""))
	// Cutoff +3h: c0 (0h), c1 (1h) go; c2 is DLQ, c3 completed at 3h stays,
	// the pending task stays.
	r := x.apply(MsgCollectTasks, CollectTasksCommand{CommandMeta: meta0, Before: t0.Add(3 * time.Hour), Limit: 1}, "")
	mustOK(t, r)
	var co CollectOutcome
	_ = json.Unmarshal(r.Value, &co)
	if co.Deleted != 1 || !co.More {
		t.Fatalf("limited collect = %+v", co)
	}
	r = x.apply(MsgCollectTasks, CollectTasksCommand{CommandMeta: meta0, Before: t0.Add(3 * time.Hour)}, "")
	mustOK(t, r)
	co = CollectOutcome{}
	_ = json.Unmarshal(r.Value, &co)
	if co.Deleted != 1 || co.More {
		t.Fatalf("collect = %+v", co)
	}
	for id, want := range map[string]bool{"c0": false, "c1": false, "c2": true, "c3": true, "p": true} {
		if _, ok := x.st.Task(id); ok != want {
			t.Errorf("task %s present = %v, want %v", id, ok, want)
		}
	}
	wantCode(t, x.apply(MsgCollectTasks, CollectTasksCommand{CommandMeta: meta0}, ""), CodeInvalidArgument, "before")
}

func TestListTasksFilters(t *testing.T) {
	x := newTaskFSM(t)
	for i := range 12 {
		x.submit(t0, 0, newTaskFor(fmt.Sprintf("l%02d", i), "ns", fmt.Sprintf("w%d", i), ""))
	}
	all := x.st.ListTasks(TaskQuery{Limit: 100})
	if len(all) != 12 {
		t.Fatalf("all = %d", len(all))
	}
	for s := range taskShards {
		want := 0
		for _, tk := range all {
			if tk.Shard == s {
				want++
			}
		}
		got := x.st.ListTasks(TaskQuery{Shard: &s, Limit: 100})
		if len(got) != want {
			t.Fatalf("shard %d: %d tasks, want %d", s, len(got), want)
		}
		for _, tk := range got {
			if tk.Shard != s {
				t.Fatalf("shard %d listing has %+v", s, tk)
			}
		}
		if n := len(x.st.ListTasks(TaskQuery{Shard: &s, Status: TaskPending, Limit: 100})); n != want {
			t.Fatalf("shard %d pending: %d, want %d", s, n, want)
		}
	}
	if page := x.st.ListTasks(TaskQuery{After: "l05", Limit: 2}); len(page) != 2 || page[0].ID != "l06" || page[1].ID != "l07" {
		t.Fatalf("page = %+v", page)
	}
	if n := len(x.st.ListTasks(TaskQuery{Status: TaskSucceeded, Limit: 100})); n != 0 {
		t.Fatalf("succeeded = %d", n)
	}

	// Paging: a full page names the next cursor, the last page none; a
	// sparse filter that runs out of scan budget pages on from the last row
	// examined instead of ending early, and visits every match.
	if page, next := x.st.ListTasksPage(TaskQuery{After: "l05", Limit: 2}); len(page) != 2 || next != "l07" {
		t.Fatalf("page after l05 = %d tasks, next %q", len(page), next)
	}
	if page, next := x.st.ListTasksPage(TaskQuery{After: "l09", Limit: 2}); len(page) != 2 || next != "" {
		t.Fatalf("last page = %d tasks, next %q", len(page), next)
	}
	defer func(b int) { taskScanBudget = b }(taskScanBudget)
	taskScanBudget = 3
	shard := all[11].Shard
	var seen []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("paging does not end")
		}
		page, next := x.st.ListTasksPage(TaskQuery{Shard: &shard, After: after, Limit: 100})
		for _, tk := range page {
			seen = append(seen, tk.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	var want []string
	for _, tk := range all {
		if tk.Shard == shard {
			want = append(want, tk.ID)
		}
	}
	if !cmp.Equal(seen, want) {
		t.Fatalf("shard %d paged with a scan budget of 3: %v, want %v", shard, seen, want)
	}
}
