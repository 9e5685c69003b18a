package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/raftstore"
	"fusebox/raftstore/raftstoretest"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
	"fusebox/tasks"
	"fusebox/transport"
)

const testShards = 4

// taskService is the API's TaskService over a real single-node store, with
// settable backlog limits and data-dir space.
type taskService struct {
	*raftstore.Store
	*state.State              // the reads (Store.Reader())
	max, total   atomic.Int64 // per destination, in all
	free, floor  atomic.Uint64
	// stale makes DestinationBacklog answer 0: a node whose view is
	// behind, so that the FSM, not the API's check, refuses.
	stale atomic.Bool
	// policy decides destinations (nil allows all); names are the extra
	// header names to redact.
	policy *transport.Policy
	names  []string
}

func newTaskService(rs *raftstore.Store) *taskService {
	return &taskService{Store: rs, State: rs.Reader()}
}

func (s *taskService) SubmitLimits(string, string) (int, int) {
	return int(s.max.Load()), int(s.total.Load())
}

func (s *taskService) DataDirSpace() (uint64, uint64) { return s.free.Load(), s.floor.Load() }

func (s *taskService) DestinationBacklog(namespace, destination string) int {
	if s.stale.Load() {
		return 0
	}
	return s.State.DestinationBacklog(namespace, destination)
}

func (s *taskService) RedactHeaderNames(string, string) []string { return s.names }

func (s *taskService) CheckEndpointURL(ctx context.Context, raw string) error {
	return s.policy.CheckEndpoint(ctx, raw)
}

func (s *taskService) CheckDestination(ctx context.Context, ns, raw string, allowlist bool) error {
	if !allowlist {
		return s.policy.CheckMembers(ctx, raw)
	}
	return s.policy.Check(ctx, ns, raw)
}

// newTaskServer serves the task routes over a real one-node raft store and
// a real loopback HTTP server. It checks for leaked goroutines at the end.
func newTaskServer(t *testing.T) (*taskService, *Client) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
	svc := newTaskService(raftstoretest.SingleNode(t, "n1", testShards))
	if _, err := svc.PutEndpoint(t.Context(), state.PutEndpointCommand{Name: "ep", URL: "http://127.0.0.1:9/nexus"}); err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, Deps{}, nil)
	s.taskRoutes(svc)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return svc, NewClient(hs.URL, "", nil)
}

func callback(ns, wf string) TaskSubmit {
	return TaskSubmit{NamespaceID: ns, WorkflowID: wf, TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:9/cb",
		Request: TaskRequest{Completion: &transport.Completion{State: transport.CompletionSucceeded}}}
}

func compact(b []byte) string {
	var buf bytes.Buffer
	_ = json.Compact(&buf, b)
	return buf.String()
}

func wantAPIError(t *testing.T, err error, status int, code, field string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != status || e.Code != code || e.Field != field {
		t.Fatalf("want %d %s on field %q, got %#v", status, code, field, err)
	}
	return e
}

func TestTaskSubmitGetAndIdempotency(t *testing.T) {
	svc, c := newTaskServer(t)
	ctx := t.Context()
	in := callback("ns", "wf-1")
	in.RequestID = "req-1"
	acc, err := c.SubmitTask(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Shard != shardmap.ShardOf("ns", "wf-1", testShards) || acc.TaskID == "" || acc.Duplicate {
		t.Fatalf("accepted = %+v", acc)
	}
	got, err := c.Task(ctx, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "pending" || got.Shard != acc.Shard || got.Attempts != 0 || got.NextAttemptAt.IsZero() || got.CreatedAt.IsZero() ||
		got.RequestID != "req-1" || !strings.Contains(compact(got.Request), `"url":"http://127.0.0.1:9/cb"`) {
		t.Fatalf("task = %+v request %s", got, got.Request)
	}
	// Same request id: the original task, 202 again, no second task.
	again, err := c.SubmitTask(ctx, callback("ns", "wf-other"))
	if err != nil || again.TaskID == acc.TaskID {
		t.Fatalf("a submit without request id = %+v, %v", again, err)
	}
	in2 := callback("ns", "wf-other")
	in2.RequestID = "req-1"
	dup, err := c.SubmitTask(ctx, in2)
	if err != nil || dup.TaskID != acc.TaskID || dup.Shard != acc.Shard || !dup.Duplicate {
		t.Fatalf("duplicate = %+v, %v", dup, err)
	}
	if n := len(svc.ListTasks(state.TaskQuery{Limit: 100})); n != 2 {
		t.Fatalf("%d tasks stored, want 2", n)
	}
	// A Nexus start to a registered endpoint.
	start := TaskSubmit{NamespaceID: "ns", WorkflowID: "wf-2", TaskGroup: "nexusoperations.Invocation", Destination: "ep",
		Request: TaskRequest{Service: "svc", Operation: "op", Input: json.RawMessage(`{"x":1}`)}}
	if _, err := c.SubmitTask(ctx, start); err != nil {
		t.Fatal(err)
	}
	_, err = c.Task(ctx, "nope")
	wantAPIError(t, err, http.StatusNotFound, CodeNotFound, "")
}

func TestTaskSubmitRejectsBadInputNamingTheField(t *testing.T) {
	svc, c := newTaskServer(t)
	ctx := t.Context()
	mod := func(f func(*TaskSubmit)) TaskSubmit {
		in := callback("ns", "wf")
		f(&in)
		return in
	}
	start := func(f func(*TaskSubmit)) TaskSubmit {
		in := TaskSubmit{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "nexusoperations.Invocation", Destination: "ep",
			Request: TaskRequest{Service: "svc", Operation: "op"}}
		f(&in)
		return in
	}
	cases := []struct {
		name  string
		in    TaskSubmit
		field string
	}{
		{"no namespace", mod(func(in *TaskSubmit) { in.NamespaceID = "" }), "namespace_id"},
		{"no workflow", mod(func(in *TaskSubmit) { in.WorkflowID = " " }), "workflow_id"},
		{"no destination", mod(func(in *TaskSubmit) { in.Destination = "" }), "destination"},
		{"control chars", mod(func(in *TaskSubmit) { in.RequestID = "a\nb" }), "request_id"},
		{"no task group", mod(func(in *TaskSubmit) { in.TaskGroup = "" }), "task_group"},
		{"unknown task group", mod(func(in *TaskSubmit) { in.TaskGroup = "x.Y" }), "task_group"},
		{"callback url", mod(func(in *TaskSubmit) { in.Destination = "ftp://x" }), "destination"},
		{"completion and body", mod(func(in *TaskSubmit) { in.Request.Body = []byte("x") }), "request.body"},
		{"unknown endpoint", start(func(in *TaskSubmit) { in.Destination = "nope" }), "destination"},
		{"no service", start(func(in *TaskSubmit) { in.Request.Service = "" }), "request.service"},
		{"bad input", start(func(in *TaskSubmit) { in.Request.Input = json.RawMessage(`"x"x`) }), ""},
		{"cancel without operation id", start(func(in *TaskSubmit) { in.TaskGroup = "nexusoperations.Cancelation" }), "request.operation_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.SubmitTask(ctx, tc.in)
			if tc.field == "" {
				// Invalid JSON inside the body: the client refuses to encode it.
				if err == nil {
					t.Fatal("accepted")
				}
				return
			}
			wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, tc.field)
		})
	}
	// Unknown JSON fields are named too.
	err := c.Do(ctx, http.MethodPost, "/v1/tasks", nil, map[string]any{"namespace_id": "ns", "bogus": 1}, nil)
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "bogus")
	if n := len(svc.ListTasks(state.TaskQuery{Limit: 10})); n != 0 {
		t.Fatalf("%d tasks stored by rejected submits", n)
	}
}

func TestTaskSubmitPayloadLimitAndBacklog(t *testing.T) {
	svc, c := newTaskServer(t)
	ctx := t.Context()
	big := TaskSubmit{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "nexusoperations.Invocation", Destination: "ep",
		Request: TaskRequest{Service: "svc", Operation: "op", Input: json.RawMessage(`"` + strings.Repeat("x", state.MaxTaskRequestBytes) + `"`)}}
	_, err := c.SubmitTask(ctx, big)
	wantAPIError(t, err, http.StatusRequestEntityTooLarge, CodeTooLarge, "request")
	huge := big
	huge.Request.Input = json.RawMessage(`"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"`)
	_, err = c.SubmitTask(ctx, huge)
	wantAPIError(t, err, http.StatusRequestEntityTooLarge, CodeTooLarge, "")

	// One pending task per destination (scheme://host of a callback): a
	// second task for the same host, on another path, gets a 429 naming the
	// destination; another destination is accepted.
	svc.max.Store(1)
	if _, err := c.SubmitTask(ctx, callback("ns", "w0")); err != nil {
		t.Fatal(err)
	}
	samehost := callback("ns", "w1")
	samehost.Destination = "http://127.0.0.1:9/other/path"
	_, err = c.SubmitTask(ctx, samehost)
	e := wantAPIError(t, err, http.StatusTooManyRequests, CodeOverloaded, "destination")
	if e.RetryAfter != 1 || e.Key != "fusebox.tasks.maxDestinationBacklog" || !strings.Contains(e.Message, `"http://127.0.0.1:9"`) {
		t.Fatalf("429 = %+v, want Retry-After 1, the key and the destination named", e)
	}
	other := callback("ns", "w1")
	other.Destination = "http://127.0.0.1:10/cb"
	if _, err := c.SubmitTask(ctx, other); err != nil {
		t.Fatalf("another destination beside a full one: %v", err)
	}
	// The header itself, as any HTTP client sees it.
	body := strings.NewReader(`{"namespace_id":"ns","workflow_id":"w2","task_group":"callbacks.Invocation","destination":"http://127.0.0.1:9/cb","request":{"completion":{"state":"succeeded"}}}`)
	resp, err := http.Post(c.Addr()+"/v1/tasks", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The FSM enforces the limit too (the API's pre-check reads a local,
	// possibly stale count): a batch of two for one destination gets one in.
	svc.max.Store(2)
	res, err := c.SubmitTasks(ctx, []TaskSubmit{callback("ns", "w3"), callback("ns", "w4")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Outcome != OutcomeAccepted || res.Results[1].Outcome != OutcomeOverloaded ||
		res.Results[1].Reason != state.OverloadDestination || res.RetryAfter != 1 {
		t.Fatalf("batch = %+v", res)
	}
	_, err = c.SubmitTasks(ctx, []TaskSubmit{callback("ns", "w5")})
	wantAPIError(t, err, http.StatusTooManyRequests, CodeOverloaded, "destination")
	if n := svc.DestinationBacklog("ns", "http://127.0.0.1:9"); n != 2 {
		t.Fatalf("destination backlog = %d, want 2", n)
	}
	// A retry of an accepted submit (same request id) to a destination at
	// its cap gets the original answer, not a 429.
	svc.max.Store(1)
	idem := callback("ns", "w-idem")
	idem.Destination, idem.RequestID = "http://127.0.0.1:11/cb", "req-idem"
	first, err := c.SubmitTask(ctx, idem)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.SubmitTask(ctx, idem); err != nil || !again.Duplicate || again.TaskID != first.TaskID {
		t.Fatalf("retry at the cap = %+v, %v; want the duplicate answer", again, err)
	}
	// The node-wide ceiling refuses every destination alike.
	svc.max.Store(0)
	svc.total.Store(int64(svc.PendingTasks()))
	_, err = c.SubmitTask(ctx, other)
	if e := wantAPIError(t, err, http.StatusTooManyRequests, CodeOverloaded, ""); e.Key != "fusebox.tasks.maxPendingTasks" {
		t.Fatalf("ceiling 429 = %+v", e)
	}
	svc.total.Store(0)
	// A data dir below its floor: 503 on this node, naming the key.
	svc.free.Store(10 << 20)
	svc.floor.Store(256 << 20)
	_, err = c.SubmitTask(ctx, other)
	if e := wantAPIError(t, err, http.StatusServiceUnavailable, CodeUnavailable, ""); e.Key != "fusebox.tasks.minFreeDiskMB" || e.RetryAfter != 5 ||
		!strings.Contains(e.Message, "10 MiB free") {
		t.Fatalf("disk 503 = %+v", e)
	}
	_, err = c.SubmitTasks(ctx, []TaskSubmit{other})
	wantAPIError(t, err, http.StatusServiceUnavailable, CodeUnavailable, "")
	svc.floor.Store(0)
	if _, err := c.SubmitTask(ctx, other); err != nil {
		t.Fatalf("floor off: %v", err)
	}
}

func TestTaskBatchSubmit(t *testing.T) {
	svc, c := newTaskServer(t)
	ctx := t.Context()
	var in []TaskSubmit
	for i := range 5 {
		in = append(in, callback("ns", fmt.Sprintf("wf-%d", i)))
	}
	res, err := c.SubmitTasks(ctx, in)
	if err != nil || len(res.Results) != 5 {
		t.Fatalf("batch = %+v, %v", res, err)
	}
	for i, r := range res.Results {
		if r.Outcome != OutcomeAccepted || r.Shard != shardmap.ShardOf("ns", fmt.Sprintf("wf-%d", i), testShards) {
			t.Fatalf("item %d = %+v", i, r)
		}
		if _, ok := svc.Task(r.TaskID); !ok {
			t.Fatalf("item %d not stored", i)
		}
	}
	in[3].NamespaceID = ""
	_, err = c.SubmitTasks(ctx, in)
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "tasks[3].namespace_id")
	_, err = c.SubmitTasks(ctx, nil)
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "tasks")
}

func TestTaskListDLQAndRedrive(t *testing.T) {
	svc, c := newTaskServer(t)
	ctx := t.Context()
	var ids []string
	for i := range 6 {
		acc, err := c.SubmitTask(ctx, callback("ns", fmt.Sprintf("wf-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, acc.TaskID)
	}
	// Dead-letter three, as their owner would.
	m := svc.ShardMap()
	for _, id := range ids[:3] {
		tk, _ := svc.Task(id)
		if _, err := svc.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: tk.Shard, Epoch: m.Shards[tk.Shard].Epoch, Node: "n1",
			Results: []state.TaskResult{{TaskID: id, Status: state.TaskDLQ, Attempts: 2, Unexpected: 5, Message: "poison task: x"}}}); err != nil {
			t.Fatal(err)
		}
	}
	dlq, err := c.DLQ(ctx, "", 2)
	if err != nil || len(dlq.Tasks) != 2 || dlq.Tasks[0].ID != ids[0] || dlq.Next != ids[1] || dlq.Tasks[0].LastAnswer == nil ||
		dlq.Tasks[0].LastAnswer.Message != "poison task: x" || dlq.Tasks[0].CompletedAt.IsZero() || dlq.Tasks[0].Request != nil {
		t.Fatalf("dlq page = %+v, %v", dlq, err)
	}
	if rest, err := c.DLQ(ctx, dlq.Next, 2); err != nil || len(rest.Tasks) != 1 || rest.Tasks[0].ID != ids[2] || rest.Next != "" {
		t.Fatalf("dlq page 2 = %+v, %v", rest, err)
	}
	pending, err := c.Tasks(ctx, TaskListQuery{Status: "pending", Limit: 100})
	if err != nil || len(pending.Tasks) != 3 {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	sh := pending.Tasks[0].Shard
	byShard, err := c.Tasks(ctx, TaskListQuery{Shard: &sh, Limit: 100})
	if err != nil || len(byShard.Tasks) == 0 {
		t.Fatalf("by shard = %+v, %v", byShard, err)
	}
	for _, tk := range byShard.Tasks {
		if tk.Shard != sh {
			t.Fatalf("shard %d listing has %+v", sh, tk)
		}
	}
	_, err = c.Tasks(ctx, TaskListQuery{Status: "done"})
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "status")
	_, err = c.Tasks(ctx, TaskListQuery{Limit: MaxTaskListLimit + 1})
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "limit")

	_, err = c.Redrive(ctx, Redrive{})
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "ids")
	r, err := c.Redrive(ctx, Redrive{IDs: []string{ids[1], ids[4]}}) // ids[4] is not dead-lettered
	if err != nil || r.Count != 1 || r.Redriven[0] != ids[1] {
		t.Fatalf("redrive = %+v, %v", r, err)
	}
	if tk, _ := c.Task(ctx, ids[1]); tk.Status != "pending" || tk.Attempts != 0 {
		t.Fatalf("redriven task = %+v", tk)
	}
	r, err = c.Redrive(ctx, Redrive{All: true})
	if err != nil || r.Count != 2 || r.More {
		t.Fatalf("redrive all = %+v, %v", r, err)
	}
	if dlq, _ := c.DLQ(ctx, "", 10); len(dlq.Tasks) != 0 {
		t.Fatalf("dlq after redrive = %+v", dlq)
	}
}

// A context-free guard: the route table answers JSON 404 for a task route
// the server does not have.
func TestTaskRoutesOnlyWithService(t *testing.T) {
	s := New(Config{}, Deps{}, nil)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	err := NewClient(hs.URL, "", nil).Do(context.Background(), http.MethodGet, "/v1/dlq", nil, nil, nil)
	wantAPIError(t, err, http.StatusNotFound, CodeNotFound, "")
}

// A task whose last attempt an open breaker refused reads as blocked
// (until its next attempt) in GET and in ?status=blocked; a task retried
// because its destination was down does not.
func TestTaskBlockedReadAndListing(t *testing.T) {
	svc, c := newTaskServer(t)
	ctx := t.Context()
	blocked, err := c.SubmitTask(ctx, callback("ns", "w-blocked"))
	if err != nil {
		t.Fatal(err)
	}
	down, err := c.SubmitTask(ctx, callback("ns", "w-down"))
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	complete := func(shard int, r state.TaskResult) {
		a := svc.ShardMap().Shards[shard]
		if _, err := svc.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: shard, Epoch: a.Epoch, Node: a.Owner,
			Results: []state.TaskResult{r}}); err != nil {
			t.Fatal(err)
		}
	}
	complete(blocked.Shard, state.TaskResult{TaskID: blocked.TaskID, Status: state.TaskPending, Blocked: 2,
		NextAttemptAt: until, Message: "circuit breaker open"})
	complete(down.Shard, state.TaskResult{TaskID: down.TaskID, Status: state.TaskPending, Attempts: 1,
		NextAttemptAt: until, Message: "503", HTTPStatus: 503})

	got, err := c.Task(ctx, blocked.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "pending" || got.Blocked == nil || got.Blocked.Reason != "circuit breaker open" || !got.Blocked.Until.Equal(until) {
		t.Fatalf("blocked task = %+v (blocked %+v), want blocked until %v", got, got.Blocked, until)
	}
	if got, err := c.Task(ctx, down.TaskID); err != nil || got.Blocked != nil {
		t.Fatalf("down task = %+v, %v: want no blocked", got, err)
	}
	list, err := c.Tasks(ctx, TaskListQuery{Status: "blocked", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 1 || list.Tasks[0].ID != blocked.TaskID || list.Tasks[0].Blocked == nil {
		t.Fatalf("?status=blocked = %+v", list.Tasks)
	}
	// Once attempted (here: it succeeded) it is no longer blocked.
	complete(blocked.Shard, state.TaskResult{TaskID: blocked.TaskID, Status: state.TaskSucceeded, Attempts: 1})
	if list, err := c.Tasks(ctx, TaskListQuery{Status: "blocked", Limit: 10}); err != nil || len(list.Tasks) != 0 {
		t.Fatalf("after success ?status=blocked = %+v, %v", list.Tasks, err)
	}
	_, err = c.Tasks(ctx, TaskListQuery{Status: "stuck", Limit: 10})
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "status")
}

// TestTaskErrorMapping: a task the domain refused keeps its code, gets the
// code's status, the batch item's prefix on its field and Retry-After when
// retryable; other errors pass through to the server's mapping.
func TestTaskErrorMapping(t *testing.T) {
	for _, c := range []struct {
		in     *tasks.Error
		status int
		field  string
		retry  int
	}{
		{&tasks.Error{Code: CodeInvalidArgument, Field: "request.header[Host]", Message: "reserved header"}, http.StatusBadRequest, "tasks[2].request.header[Host]", 0},
		{&tasks.Error{Code: CodeTooLarge, Field: "request", Message: "big"}, http.StatusRequestEntityTooLarge, "tasks[2].request", 0},
		{&tasks.Error{Code: CodeUnavailable, Message: "the cluster has no shard count yet"}, http.StatusServiceUnavailable, "", 1},
	} {
		var e *Error
		if !errors.As(taskError(fmt.Errorf("wrapped: %w", c.in), "tasks[2]."), &e) {
			t.Fatalf("%v: not an *api.Error", c.in)
		}
		if e.Status != c.status || e.Code != c.in.Code || e.Field != c.field || e.RetryAfter != c.retry || e.Message != c.in.Message {
			t.Errorf("%v → %+v", c.in, e)
		}
	}
	other := context.Canceled
	if err := taskError(other, "tasks[0]."); err != other {
		t.Fatalf("taskError(%v) = %v, want it unchanged", other, err)
	}
	if taskError(nil, "") != nil {
		t.Fatal("taskError(nil) != nil")
	}
}
