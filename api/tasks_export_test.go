package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/raftstore/raftstoretest"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// GET /v1/tasks:export on the Raft store pages the pending tasks (not the
// terminal ones) with their requests as stored, the secret header value
// included, and answers Cache-Control: no-store; POST /v1/tasks:import
// takes them back idempotently (import_tasks).
func TestTaskExportOnRaftStore(t *testing.T) {
	svc, c := newTaskServer(t)
	var ids []string
	for _, wf := range []string{"wf-1", "wf-2", "wf-3"} {
		ts := callback("ns", wf)
		ts.Request.Header = map[string]string{"Authorization": "Bearer s3cret"}
		acc, err := c.SubmitTask(t.Context(), ts)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, acc.TaskID)
	}
	// One task terminal: not exported.
	done, _ := svc.Task(ids[1])
	if _, err := svc.CompleteTasks(t.Context(), state.CompleteTasksCommand{Shard: done.Shard, Epoch: svc.ShardMap().Shards[done.Shard].Epoch, Node: "n1",
		Results: []state.TaskResult{{TaskID: ids[1], Status: state.TaskSucceeded, Attempts: 1}}}); err != nil {
		t.Fatal(err)
	}
	var got []TaskExport
	for after := ""; ; {
		p, err := c.ExportTasks(t.Context(), after, 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Tasks...)
		if after = p.Next; after == "" {
			break
		}
	}
	if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[2] {
		t.Fatalf("exported %+v, want %s and %s", got, ids[0], ids[2])
	}
	for _, e := range got {
		if e.Version != TaskExportVersion || !strings.Contains(string(e.Request), "Bearer s3cret") || e.CreatedAt.IsZero() || e.NamespaceID != "ns" {
			t.Fatalf("exported %+v (request %s)", e, e.Request)
		}
	}
	resp, err := http.Get(c.Addr() + "/v1/tasks:export")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cc := resp.Header.Get("Cache-Control"); resp.StatusCode != http.StatusOK || cc != "no-store" {
		t.Fatalf("export answered %d, Cache-Control %q", resp.StatusCode, cc)
	}
	// The export imported back: every task is there already, a duplicate
	// naming it. Under a new id the task is added, pending, with the
	// attempts it brought.
	res, err := c.ImportTasks(t.Context(), got)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Results {
		if r.Outcome != OutcomeDuplicate || r.TaskID != got[i].ID {
			t.Fatalf("re-import item %d = %+v, want a duplicate of %s", i, r, got[i].ID)
		}
	}
	moved := got[0]
	moved.ID, moved.WorkflowID, moved.Attempts = state.NewTaskID(time.Now()), "wf-moved", 3
	if res, err = c.ImportTasks(t.Context(), []TaskExport{moved}); err != nil || res.Results[0].Outcome != OutcomeAccepted {
		t.Fatalf("import under a new id = %+v, %v", res, err)
	}
	if tk, err := c.Task(t.Context(), moved.ID); err != nil || tk.Status != state.TaskPending || tk.Attempts != 3 {
		t.Fatalf("imported task %+v, %v", tk, err)
	}
}

// importSvc is the raft test service with an importer that records what
// it was given instead of storing it (the stores' imports are tested in
// raftstore/state, pgstore and node).
type importSvc struct {
	*taskService
	got []ImportedTask
}

func (s *importSvc) ImportTasks(_ context.Context, ts []ImportedTask) ([]state.SubmitOutcome, error) {
	s.got = append(s.got, ts...)
	out := make([]state.SubmitOutcome, len(ts))
	for i, t := range ts {
		out[i] = state.SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: state.SubmitAccepted}
	}
	return out, nil
}

func newImportHandlers(tb testing.TB) (*taskHandlers, *importSvc) {
	svc := &importSvc{taskService: newTaskService(raftstoretest.SingleNode(tb, "n1", testShards))}
	svc.max.Store(1) // limits set: an import clears them
	s := New(Config{}, Deps{}, nil)
	return &taskHandlers{s: s, svc: svc, guard: newSubmitGuard(svc, nil, s.log)}, svc
}

func exportedSeed() TaskExport {
	req, _ := json.Marshal(transport.Request{TaskGroup: "callbacks.Invocation", URL: "http://127.0.0.1:9/cb",
		Completion: &transport.Completion{State: transport.CompletionSucceeded}, Header: map[string]string{"Authorization": "Bearer x"}})
	return TaskExport{
		Version: 1, ID: "18ed47bcefae20bf20490dbca448d856", NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "callbacks.Invocation",
		Destination: "http://127.0.0.1:9/cb", RequestID: "rid", Request: req, Attempts: 4,
		NextAttemptAt: time.Unix(1_800_000_000, 0).UTC(), CreatedAt: time.Unix(1_700_000_000, 0).UTC(),
		Deadline: time.Unix(1_900_000_000, 0).UTC(),
	}
}

// An import item is validated as a submit, keeps its id, request id,
// attempts, next attempt, creation time and deadline, and carries no
// backlog limits; bad items are 400s naming tasks[i].field.
func TestImportedTaskValidation(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
	h, _ := newImportHandlers(t)
	at := time.Now()
	e := exportedSeed()
	it, err := h.importedTask(t.Context(), &e, at, "tasks[0].")
	if err != nil {
		t.Fatal(err)
	}
	if it.ID != e.ID || it.RequestID != "rid" || it.Attempts != 4 || !it.NextAttemptAt.Equal(e.NextAttemptAt) ||
		!it.CreatedAt.Equal(e.CreatedAt) || !it.Deadline.Equal(e.Deadline) || it.MaxDestinationBacklog != 0 || it.MaxPendingTasks != 0 ||
		!strings.Contains(string(it.Request), "Bearer x") {
		t.Fatalf("imported %+v", it)
	}
	for field, mutate := range map[string]func(*TaskExport){
		"v":           func(e *TaskExport) { e.Version = 2 },
		"id":          func(e *TaskExport) { e.ID = "ABC" },
		"attempts":    func(e *TaskExport) { e.Attempts = -1 },
		"created_at":  func(e *TaskExport) { e.CreatedAt = time.Time{} },
		"request":     func(e *TaskExport) { e.Request = json.RawMessage(`{"unknown_field":1}`) },
		"destination": func(e *TaskExport) { e.Destination = "ftp://x" },
		"task_group":  func(e *TaskExport) { e.TaskGroup = "nope" },
	} {
		bad := exportedSeed()
		mutate(&bad)
		_, err := h.importedTask(t.Context(), &bad, at, "tasks[3].")
		if e := (*Error)(nil); !asErr(err, &e) || e.Status != http.StatusBadRequest || e.Field != "tasks[3]."+field {
			t.Errorf("%s: got %v, want a 400 naming tasks[3].%s", field, err, field)
		}
	}
}

func asErr(err error, e **Error) bool {
	v, ok := err.(*Error)
	*e = v
	return ok
}

// FuzzImportTask: any bytes decoded as an import item either fail
// validation with a 400 naming a tasks[0] field, or give a task with the
// item's id, a shard in range and a request that decodes; never a panic.
func FuzzImportTask(f *testing.F) {
	seed, _ := json.Marshal(exportedSeed())
	f.Add(seed)
	f.Add([]byte(`{"v":1,"id":"00000000000000000000000000000000","request":{}}`))
	f.Add([]byte(`{"v":1,"id":"18ed47bcefae20bf20490dbca448d856","task_group":"nexusoperations.Invocation","destination":"ep","request":"x"}`))
	h, _ := newImportHandlers(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var e TaskExport
		if json.Unmarshal(b, &e) != nil {
			return
		}
		it, err := h.importedTask(context.Background(), &e, time.Now(), "tasks[0].")
		if err != nil {
			var ae *Error
			if !asErr(err, &ae) || !strings.HasPrefix(ae.Field, "tasks[0].") {
				t.Fatalf("error %v does not name a tasks[0] field", err)
			}
			return
		}
		var req transport.Request
		if it.ID != e.ID || it.Shard < 0 || it.Shard >= testShards || json.Unmarshal(it.Request, &req) != nil {
			t.Fatalf("imported %+v from %+v", it, e)
		}
	})
}
