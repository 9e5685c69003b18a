package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"fusebox/shardmap"
)

const taskShards = 4

// taskFSM is an FSM with the shard count set and a map committed that gives
// the shards to nodes "a" and "b".
type taskFSM struct {
	t   *testing.T
	f   *FSM
	st  *State
	idx uint64
	m   *shardmap.Map
}

func newTaskFSM(t *testing.T) *taskFSM {
	t.Helper()
	x := &taskFSM{t: t, f: newTestFSM(t, StateOptions{})}
	x.st = x.f.State()
	mustOK(t, x.apply(MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: taskShards}, ""))
	x.m, _, _ = shardmap.Rebalance(mustNewMap(t, taskShards), []string{"a", "b"}, nil)
	mustOK(t, x.apply(MsgCommitShardMap, CommitShardMapCommand{CommandMeta: meta0, Map: x.m}, ""))
	return x
}

func (x *taskFSM) apply(typ MessageType, payload any, reqID string) *ApplyResult {
	x.t.Helper()
	x.idx++
	return applyCmd(x.t, x.f, x.idx, typ, payload, reqID)
}

func newTaskFor(id, ns, wf, reqID string) NewTask {
	return NewTask{ID: id, Shard: shardmap.ShardOf(ns, wf, taskShards), NamespaceID: ns, WorkflowID: wf,
		TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", RequestID: reqID,
		Request: json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb"}`)}
}

func (x *taskFSM) submit(at time.Time, maxBacklog int, tasks ...NewTask) []SubmitOutcome {
	x.t.Helper()
	r := x.apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: CommandMeta{At: at}, Tasks: tasks, MaxShardBacklog: maxBacklog}, "")
	mustOK(x.t, r)
	var out []SubmitOutcome
	if err := json.Unmarshal(r.Value, &out); err != nil {
		x.t.Fatal(err)
	}
	return out
}

func (x *taskFSM) complete(shard int, node string, epoch uint64, results ...TaskResult) CompleteOutcome {
	x.t.Helper()
	r := x.apply(MsgCompleteTasks, CompleteTasksCommand{CommandMeta: CommandMeta{At: t0.Add(time.Hour)}, Shard: shard, Epoch: epoch, Node: node, Results: results}, "")
	mustOK(x.t, r)
	var out CompleteOutcome
	if err := json.Unmarshal(r.Value, &out); err != nil {
		x.t.Fatal(err)
	}
	return out
}

func (x *taskFSM) owner(shard int) (string, uint64) {
	a := x.st.ShardMap().Shards[shard]
	return a.Owner, a.Epoch
}

func TestSubmitTasksAndIdempotency(t *testing.T) {
	x := newTaskFSM(t)
	wake, cancel := x.st.Subscribe(TableTasks)
	defer cancel()
	a := newTaskFor("t1", "ns", "wf-1", "req-1")
	out := x.submit(t0, 0, a, newTaskFor("t2", "ns", "wf-2", ""))
	if out[0] != (SubmitOutcome{TaskID: "t1", Shard: a.Shard, Outcome: SubmitAccepted}) || out[1].Outcome != SubmitAccepted {
		t.Fatalf("outcomes = %+v", out)
	}
	select {
	case <-wake:
	default:
		t.Fatal("submit did not wake TableTasks subscribers")
	}
	got, ok := x.st.Task("t1")
	if !ok || got.Status != TaskPending || !got.CreatedAt.Equal(t0) || !got.NextAttemptAt.Equal(t0) || got.Index != x.idx || got.RequestID != "req-1" {
		t.Fatalf("task = %+v", got)
	}
	// The same (namespace, request id) again, even with another task id and
	// workflow: no second task, the original id and shard.
	dup := newTaskFor("t3", "ns", "wf-9", "req-1")
	out = x.submit(t0.Add(time.Second), 0, dup)
	if out[0] != (SubmitOutcome{TaskID: "t1", Shard: a.Shard, Outcome: SubmitDuplicate}) {
		t.Fatalf("duplicate outcome = %+v", out)
	}
	if _, ok := x.st.Task("t3"); ok {
		t.Fatal("duplicate submit inserted a task")
	}
	// The request id is scoped by namespace.
	if out := x.submit(t0, 0, newTaskFor("t4", "other-ns", "wf-1", "req-1")); out[0].Outcome != SubmitAccepted {
		t.Fatalf("other namespace = %+v", out)
	}
	// Twice in one batch: the second is a duplicate of the first.
	if out := x.submit(t0, 0, newTaskFor("t5", "ns", "wf-5", "req-2"), newTaskFor("t6", "ns", "wf-6", "req-2")); out[1] != (SubmitOutcome{TaskID: "t5", Shard: out[0].Shard, Outcome: SubmitDuplicate}) {
		t.Fatalf("in-batch duplicate = %+v", out)
	}
	if tk, ok := x.st.TaskByRequestID("ns", "req-1"); !ok || tk.ID != "t1" {
		t.Fatalf("TaskByRequestID = %+v %v", tk, ok)
	}
	total := 0
	for s := range taskShards {
		total += x.st.TaskBacklog(s)
	}
	if total != 4 {
		t.Fatalf("backlog total = %d, want 4", total)
	}
}

func TestSubmitTasksRejectsBadInputAtomically(t *testing.T) {
	x := newTaskFSM(t)
	good := newTaskFor("ok", "ns", "wf", "")
	wrongShard := newTaskFor("ws", "ns", "wf", "")
	wrongShard.Shard = (wrongShard.Shard + 1) % taskShards
	noNS := newTaskFor("nn", "", "wf", "")
	big := newTaskFor("big", "ns", "wf", "")
	big.Request = json.RawMessage(`"` + string(bytes.Repeat([]byte("x"), MaxTaskRequestBytes)) + `"`)
	cases := []struct {
		name  string
		tasks []NewTask
		code  string
		field string
	}{
		{"no tasks", nil, CodeInvalidArgument, "tasks"},
		{"wrong shard", []NewTask{good, wrongShard}, CodeInvalidArgument, "tasks[1].shard"},
		{"no namespace", []NewTask{noNS}, CodeInvalidArgument, "tasks[0].namespace_id"},
		{"too big", []NewTask{big}, CodeInvalidArgument, "tasks[0].request"},
		{"id reused", []NewTask{good, good}, CodeConflict, "tasks[1].id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantCode(t, x.apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: c.tasks}, ""), c.code, c.field)
			if _, ok := x.st.Task("ok"); ok {
				t.Fatal("a rejected batch inserted a task")
			}
		})
	}
	// Without a shard count nothing can be placed.
	empty := newTestFSM(t, StateOptions{})
	wantCode(t, applyCmd(t, empty, 1, MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{good}}, ""), CodeConflict, "shard")
}

func TestSubmitTasksBacklogLimit(t *testing.T) {
	x := newTaskFSM(t)
	// Two workflows of one shard.
	wf := []string{}
	shard := shardmap.ShardOf("ns", "w0", taskShards)
	for i := 0; len(wf) < 3; i++ {
		if w := fmt.Sprintf("w%d", i); shardmap.ShardOf("ns", w, taskShards) == shard {
			wf = append(wf, w)
		}
	}
	out := x.submit(t0, 2, newTaskFor("a", "ns", wf[0], ""), newTaskFor("b", "ns", wf[1], ""), newTaskFor("c", "ns", wf[2], ""))
	if out[0].Outcome != SubmitAccepted || out[1].Outcome != SubmitAccepted || out[2].Outcome != SubmitOverloaded {
		t.Fatalf("outcomes = %+v", out)
	}
	if n := x.st.TaskBacklog(shard); n != 2 {
		t.Fatalf("backlog = %d, want 2", n)
	}
	if _, ok := x.st.Task("c"); ok {
		t.Fatal("overloaded task inserted")
	}
}

func TestDueTasksOrderAndNextDue(t *testing.T) {
	x := newTaskFSM(t)
	shard := shardmap.ShardOf("ns", "w", taskShards)
	// Submitted in reverse time order; one other shard's task in between.
	x.submit(t0.Add(3*time.Second), 0, newTaskFor("c", "ns", "w", ""))
	x.submit(t0.Add(1*time.Second), 0, newTaskFor("a", "ns", "w", ""))
	other := "x"
	for i := 0; shardmap.ShardOf("ns", other, taskShards) == shard; i++ {
		other = fmt.Sprintf("x%d", i)
	}
	x.submit(t0.Add(2*time.Second), 0, newTaskFor("o", "ns", other, ""))
	x.submit(t0.Add(2*time.Second), 0, newTaskFor("b", "ns", "w", ""))

	// ids lists the ids ScanDue returns from from (zero: the start).
	ids := func(shard int, from, now time.Time, limit int, skip func(string) bool) (out []string) {
		due, _, _ := x.st.ScanDue(shard, from, now, limit, skip)
		for _, tk := range due {
			out = append(out, tk.ID)
		}
		return out
	}
	if got := ids(shard, time.Time{}, t0.Add(time.Hour), 10, nil); !cmp.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("due = %v", got)
	}
	if got := ids(shard, time.Time{}, t0.Add(2*time.Second), 10, nil); !cmp.Equal(got, []string{"a", "b"}) {
		t.Fatalf("due at +2s = %v", got)
	}
	// From a time: the tasks due at or after it, never another shard's
	// (one of the two shards sorts after the other, so one of these scans
	// would run into the other shard's task without the boundary check).
	if got := ids(shard, t0.Add(2*time.Second), t0.Add(time.Hour), 10, nil); !cmp.Equal(got, []string{"b", "c"}) {
		t.Fatalf("due from +2s = %v", got)
	}
	if got := ids(shard, t0, t0.Add(time.Hour), 10, nil); !cmp.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("due from t0 = %v", got)
	}
	otherShard := shardmap.ShardOf("ns", other, taskShards)
	if got := ids(otherShard, t0, t0.Add(time.Hour), 10, nil); !cmp.Equal(got, []string{"o"}) {
		t.Fatalf("other shard's due from t0 = %v", got)
	}
	if got := ids(shard, t0.Add(4*time.Second), t0.Add(time.Hour), 10, nil); len(got) != 0 {
		t.Fatalf("due from after the last task = %v", got)
	}
	// ScanDue also reports the first due time after now when its walk got
	// there (the shard's end, or the other shard's rows, mean none).
	for _, tc := range []struct {
		shard int
		now   time.Time
		limit int
		want  []string
		next  time.Time
		known bool
	}{
		{shard, t0.Add(2 * time.Second), 10, []string{"a", "b"}, t0.Add(3 * time.Second), true},
		{shard, t0.Add(time.Hour), 10, []string{"a", "b", "c"}, time.Time{}, true},
		{shard, t0.Add(time.Hour), 1, []string{"a"}, time.Time{}, false},
		{shardmap.ShardOf("ns", other, taskShards), t0.Add(time.Hour), 10, []string{"o"}, time.Time{}, true},
	} {
		due, next, known := x.st.ScanDue(tc.shard, time.Time{}, tc.now, tc.limit, nil)
		var got []string
		for _, tk := range due {
			got = append(got, tk.ID)
		}
		if !cmp.Equal(got, tc.want) || !next.Equal(tc.next) || known != tc.known {
			t.Fatalf("ScanDue(shard %d, now %v, limit %d) = %v, %v, %v; want %v, %v, %v",
				tc.shard, tc.now.Sub(t0), tc.limit, got, next, known, tc.want, tc.next, tc.known)
		}
	}
	skipA := func(id string) bool { return id == "a" }
	if got := ids(shard, time.Time{}, t0.Add(time.Hour), 1, skipA); !cmp.Equal(got, []string{"b"}) {
		t.Fatalf("due skipping a, limit 1 = %v", got)
	}
	if next, ok := x.st.NextTaskDue(shard, t0.Add(time.Second)); !ok || !next.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("next due after +1s = %v %v", next, ok)
	}
	if _, ok := x.st.NextTaskDue(shard, t0.Add(3*time.Second)); ok {
		t.Fatal("next due after the last task")
	}
	// A retry moves the task in the due order.
	owner, epoch := x.owner(shard)
	x.complete(shard, owner, epoch, TaskResult{TaskID: "a", Status: TaskPending, Attempts: 1, NextAttemptAt: t0.Add(10 * time.Second), Message: "503"})
	if got := ids(shard, time.Time{}, t0.Add(time.Hour), 10, nil); !cmp.Equal(got, []string{"b", "c", "a"}) {
		t.Fatalf("due after retry = %v", got)
	}
	// The oldest pending task is by creation, not by due time: a (created
	// at +1 s) is now due last.
	if oldest, ok := x.st.OldestPendingTask(shard); !ok || oldest.ID != "a" {
		t.Fatalf("oldest pending = %v %v, want a", oldest.ID, ok)
	}
	if _, ok := x.st.OldestPendingTask(shard + 1000); ok {
		t.Fatal("oldest pending task of a shard with none")
	}
}

func TestCompleteTasksFencingAndTerminal(t *testing.T) {
	x := newTaskFSM(t)
	shard := shardmap.ShardOf("ns", "w", taskShards)
	x.submit(t0, 0, newTaskFor("t1", "ns", "w", ""))
	owner, epoch := x.owner(shard)
	other := "a"
	if owner == "a" {
		other = "b"
	}
	res := TaskResult{TaskID: "t1", Status: TaskSucceeded, Attempts: 1, HTTPStatus: 200, Message: "ok"}

	// A stale epoch and a non-owner are refused as a whole, nothing written.
	for _, c := range []struct {
		node  string
		epoch uint64
	}{{owner, epoch + 1}, {owner, epoch - 1}, {other, epoch}} {
		out := x.complete(shard, c.node, c.epoch, res)
		if out.Refused == nil || *out.Refused != (RefusedShard{Shard: shard, Owner: owner, Epoch: epoch}) || out.Applied != 0 {
			t.Fatalf("node %s epoch %d: outcome %+v", c.node, c.epoch, out)
		}
	}
	if tk, _ := x.st.Task("t1"); tk.Status != TaskPending || x.st.TaskBacklog(shard) != 1 {
		t.Fatalf("refused complete changed the task: %+v", tk)
	}
	// A shard outside the map is invalid, not a refusal.
	wantCode(t, x.apply(MsgCompleteTasks, CompleteTasksCommand{CommandMeta: meta0, Shard: taskShards, Node: owner, Epoch: epoch}, ""), CodeInvalidArgument, "shard")

	// The owner: applied; unknown ids ignored.
	out := x.complete(shard, owner, epoch, res, TaskResult{TaskID: "nope", Status: TaskFailed})
	if out.Applied != 1 || out.Ignored != 1 || out.Refused != nil {
		t.Fatalf("outcome = %+v", out)
	}
	tk, _ := x.st.Task("t1")
	if tk.Status != TaskSucceeded || tk.Attempts != 1 || tk.HTTPStatus != 200 || !tk.CompletedAt.Equal(t0.Add(time.Hour)) || x.st.TaskBacklog(shard) != 0 {
		t.Fatalf("completed task = %+v backlog %d", tk, x.st.TaskBacklog(shard))
	}
	// A second (late, duplicate) result for a terminal task is ignored.
	out = x.complete(shard, owner, epoch, TaskResult{TaskID: "t1", Status: TaskFailed, Attempts: 2})
	if out.Applied != 0 || out.Ignored != 1 {
		t.Fatalf("second complete = %+v", out)
	}
	if again, _ := x.st.Task("t1"); again.Status != TaskSucceeded || again.Attempts != 1 || x.st.TaskBacklog(shard) != 0 {
		t.Fatalf("terminal task changed: %+v", again)
	}
	// Results with an invalid status are rejected naming the field.
	wantCode(t, x.apply(MsgCompleteTasks, CompleteTasksCommand{CommandMeta: meta0, Shard: shard, Node: owner, Epoch: epoch,
		Results: []TaskResult{{TaskID: "t1", Status: "done"}}}, ""), CodeInvalidArgument, "results[0].status")
}

func TestTasksSnapshotRoundTrip(t *testing.T) {
	x := newTaskFSM(t)
	x.submit(t0, 0, newTaskFor("s1", "ns", "w1", "r1"), newTaskFor("s2", "ns", "w2", ""), newTaskFor("s3", "ns", "w3", ""))
	s2, _ := x.st.Task("s2")
	owner, epoch := x.owner(s2.Shard)
	x.complete(s2.Shard, owner, epoch, TaskResult{TaskID: "s2", Status: TaskDLQ, Unexpected: 5})
	data := snapshotBytes(t, x.f)

	dst := newTestFSM(t, StateOptions{})
	wake, cancel := dst.State().Subscribe(TableTasks)
	defer cancel()
	if err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	default:
		t.Fatal("restore did not wake TableTasks subscribers")
	}
	if diff := cmp.Diff(x.st.ListTasks(TaskQuery{Limit: 100}), dst.State().ListTasks(TaskQuery{Limit: 100})); diff != "" {
		t.Fatalf("restored tasks differ:\n%s", diff)
	}
	for s := range taskShards {
		if a, b := x.st.TaskBacklog(s), dst.State().TaskBacklog(s); a != b {
			t.Fatalf("shard %d backlog %d vs restored %d", s, a, b)
		}
	}
	// The indexes were rebuilt: idempotency and the DLQ listing work.
	if tk, ok := dst.State().TaskByRequestID("ns", "r1"); !ok || tk.ID != "s1" {
		t.Fatalf("request index after restore: %+v %v", tk, ok)
	}
	if dlq := dst.State().ListTasks(TaskQuery{Status: TaskDLQ, Limit: 10}); len(dlq) != 1 || dlq[0].ID != "s2" {
		t.Fatalf("dlq after restore = %+v", dlq)
	}
	if again := snapshotBytes(t, dst); !bytes.Equal(again, data) {
		t.Fatal("snapshot of the restored state is not byte-identical")
	}
}

func TestTaskIDsSortByTime(t *testing.T) {
	a, b := NewTaskID(t0), NewTaskID(t0.Add(time.Nanosecond))
	if !(a < b) || len(a) != 32 || NewTaskID(t0) == a {
		t.Fatalf("ids %s %s", a, b)
	}
	// The first half is the Unix nanoseconds in 16 hex digits, as ids were
	// always written (before 1970 too: two's complement).
	for _, at := range []time.Time{t0, time.Unix(0, -5), time.Unix(0, 0)} {
		if id, want := NewTaskID(at), fmt.Sprintf("%016x", uint64(at.UnixNano())); id[:16] != want || strings.ToLower(id) != id {
			t.Fatalf("id %s at %v, want prefix %s", id, at, want)
		}
	}
}

// A task's request and a result's output are opaque to the replicated
// state: the proposer refuses one that is not JSON (ValidateProposal), the
// FSM stores what was proposed (its Validate does not parse them).
func TestPayloadChecksAreTheProposers(t *testing.T) {
	good := newTaskFor("ok", "ns", "wf", "")
	badReq := newTaskFor("br", "ns", "wf-2", "")
	badReq.Request = json.RawMessage(`[1]`)

	sub := SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{good, badReq}}
	if err := sub.ValidateProposal(); err == nil || err.Code != CodeInvalidArgument || err.Field != "tasks[1].request" {
		t.Fatalf("submit ValidateProposal = %+v, want invalid_argument on tasks[1].request", err)
	}
	imp := ImportTasksCommand{CommandMeta: meta0, Tasks: []ImportedTask{
		{NewTask: good, NextAttemptAt: t0, CreatedAt: t0}, {NewTask: badReq, NextAttemptAt: t0, CreatedAt: t0}}}
	if err := imp.ValidateProposal(); err == nil || err.Field != "tasks[1].request" {
		t.Fatalf("import ValidateProposal = %+v, want invalid_argument on tasks[1].request", err)
	}
	comp := CompleteTasksCommand{CommandMeta: meta0, Shard: 1, Epoch: 1, Node: "a", Results: []TaskResult{
		{TaskID: "00000000000000000000000000000001", Status: TaskSucceeded, Output: json.RawMessage(`{"a":1}`)},
		{TaskID: "00000000000000000000000000000002", Status: TaskSucceeded, Output: json.RawMessage(`{"a":`)}}}
	if err := comp.ValidateProposal(); err == nil || err.Field != "results[1].output" {
		t.Fatalf("complete ValidateProposal = %+v, want invalid_argument on results[1].output", err)
	}
	for name, err := range map[string]*Error{"submit": sub.Validate(), "import": imp.Validate(), "complete": comp.Validate()} {
		if err != nil {
			t.Errorf("%s: the FSM's Validate parsed an opaque payload: %v", name, err)
		}
	}

	// Applied, a submit stores the request as proposed.
	x := newTaskFSM(t)
	mustOK(t, x.apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{badReq}}, ""))
	if tk, ok := x.st.Task("br"); !ok || string(tk.Request) != `[1]` {
		t.Fatalf("stored task = %+v %v, want the request as proposed", tk, ok)
	}
}
