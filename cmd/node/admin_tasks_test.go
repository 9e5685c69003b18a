package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/goleak"
)

// apiRecorder is a stand-in node API: it records each request and answers
// with the canned status and body for its "METHOD path".
type apiRecorder struct {
	mu      sync.Mutex
	reqs    []recorded
	answers map[string]cannedAnswer
}

type recorded struct {
	method, path, query string
	body                []byte
}

type cannedAnswer struct {
	status int
	body   string
	header map[string]string
}

func newAPIRecorder(t *testing.T, answers map[string]cannedAnswer) (*apiRecorder, string) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
	a := &apiRecorder{answers: answers}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, b})
		a.mu.Unlock()
		ans, ok := a.answers[r.Method+" "+r.URL.Path]
		if !ok {
			ans = cannedAnswer{status: 404, body: `{"error":{"code":"not_found","message":"no route"}}`}
		}
		for k, v := range ans.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ans.status)
		_, _ = io.WriteString(w, ans.body)
	}))
	t.Cleanup(hs.Close)
	return a, hs.Listener.Addr().String()
}

func (a *apiRecorder) last(t *testing.T) recorded {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.reqs) == 0 {
		t.Fatal("the CLI sent no request")
	}
	return a.reqs[len(a.reqs)-1]
}

// lastOf is the last request with this method and path.
func (a *apiRecorder) lastOf(t *testing.T, method, path string) recorded {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.reqs) - 1; i >= 0; i-- {
		if a.reqs[i].method == method && a.reqs[i].path == path {
			return a.reqs[i]
		}
	}
	t.Fatalf("the CLI sent no %s %s", method, path)
	return recorded{}
}

func (a *apiRecorder) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

// runAdmin runs one of the task commands the way `fusebox admin` would.
func runAdmin(t *testing.T, addr string, mk func(*adminOpts) *cobra.Command, args ...string) (string, error) {
	t.Helper()
	o := &adminOpts{addr: addr, timeout: 5 * time.Second}
	root := &cobra.Command{Use: "admin", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().BoolVar(&o.json, "json", false, "")
	root.AddCommand(mk(o))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestAdminTasksSubmit(t *testing.T) {
	rec, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"POST /v1/tasks": {status: 202, body: `{"task_id":"t-1","shard":2}`},
	})
	out, err := runAdmin(t, addr, tasksCmd, "tasks", "submit", "--namespace", "ns", "--workflow", "wf", "--task-group",
		"nexusoperations.Invocation", "--destination", "ep", "--request-id", "r1",
		"--request", `{"service":"svc","operation":"op","input":{"x":1}}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "task t-1 on shard 2 (accepted)") {
		t.Fatalf("output = %q", out)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.last(t).body, &body); err != nil {
		t.Fatal(err)
	}
	req, _ := body["request"].(map[string]any)
	if body["namespace_id"] != "ns" || body["workflow_id"] != "wf" || body["destination"] != "ep" || body["request_id"] != "r1" ||
		req["service"] != "svc" || req["operation"] != "op" {
		t.Fatalf("sent body = %s", rec.last(t).body)
	}
	// --json prints the API's answer.
	out, err = runAdmin(t, addr, tasksCmd, "--json", "tasks", "submit", "--namespace", "ns", "--workflow", "wf",
		"--task-group", "callbacks.Invocation", "--destination", "http://x/cb")
	var acc map[string]any
	if err != nil || json.Unmarshal([]byte(out), &acc) != nil || acc["task_id"] != "t-1" {
		t.Fatalf("--json output = %q, %v", out, err)
	}
	// A request that is not JSON is a usage error; nothing is sent.
	n := rec.count()
	if _, err := runAdmin(t, addr, tasksCmd, "tasks", "submit", "--request", `{"nope":1}`); exitCode(err) != 2 || rec.count() != n {
		t.Fatalf("bad --request: exit %d, %v", exitCode(err), err)
	}
}

func TestAdminTasksErrorsMapToExitCodes(t *testing.T) {
	_, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"POST /v1/tasks": {status: 429, body: `{"error":{"code":"resource_exhausted","message":"shard 1 is full","retry_after":1}}`,
			header: map[string]string{"Retry-After": "1"}},
		"GET /v1/tasks/x": {status: 404, body: `{"error":{"code":"not_found","message":"no task \"x\""}}`},
	})
	if _, err := runAdmin(t, addr, tasksCmd, "tasks", "submit", "--namespace", "ns", "--workflow", "wf", "--task-group", "callbacks.Invocation",
		"--destination", "http://x/cb"); exitCode(err) != 4 || !strings.Contains(err.Error(), "shard 1 is full") {
		t.Fatalf("429: exit %d, %v", exitCode(err), err)
	}
	if _, err := runAdmin(t, addr, tasksCmd, "tasks", "get", "x"); exitCode(err) != 3 {
		t.Fatalf("404: exit %d, %v", exitCode(err), err)
	}
}

func TestAdminTasksGetAndList(t *testing.T) {
	task := `{"id":"t-1","shard":3,"namespace_id":"ns","workflow_id":"wf","task_group":"callbacks.Invocation","destination":"http://x/cb",
		"status":"pending","attempts":2,"next_attempt_at":"2026-01-02T03:04:05Z","created_at":"2026-01-02T03:00:00Z",
		"last_answer":{"http_status":503,"message":"unavailable"}}`
	rec, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"GET /v1/tasks/t-1": {status: 200, body: task},
		"GET /v1/tasks":     {status: 200, body: `{"tasks":[` + task + `],"next":"t-1"}`},
	})
	out, err := runAdmin(t, addr, tasksCmd, "tasks", "get", "t-1")
	if err != nil || !strings.Contains(out, "503 unavailable") || !strings.Contains(out, "2026-01-02T03:04:05Z") || !strings.Contains(out, "pending") {
		t.Fatalf("get output = %q, %v", out, err)
	}
	out, err = runAdmin(t, addr, tasksCmd, "tasks", "list", "--shard", "0", "--status", "pending", "--limit", "1")
	if err != nil || !strings.Contains(out, "t-1") || !strings.Contains(out, "NEXT") {
		t.Fatalf("list output = %q, %v", out, err)
	}
	if q := rec.last(t).query; !strings.Contains(q, "shard=0") || !strings.Contains(q, "status=pending") || !strings.Contains(q, "limit=1") {
		t.Fatalf("list query = %q", q)
	}
	// Without --shard there is no shard filter.
	if _, err := runAdmin(t, addr, tasksCmd, "tasks", "list"); err != nil || strings.Contains(rec.last(t).query, "shard") {
		t.Fatalf("list without --shard sent %q, %v", rec.last(t).query, err)
	}
}

// A blocked task (an open breaker refused its last attempt) says so in get
// and list; list --status blocked asks the API for exactly those.
func TestAdminTasksShowBlocked(t *testing.T) {
	task := `{"id":"t-b","shard":1,"namespace_id":"ns","workflow_id":"wf","task_group":"callbacks.Invocation","destination":"http://x/cb",
		"status":"pending","attempts":0,"next_attempt_at":"2026-01-02T03:04:05Z","created_at":"2026-01-02T03:00:00Z",
		"blocked":{"reason":"circuit breaker open","until":"2026-01-02T03:04:05Z"}}`
	rec, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"GET /v1/tasks/t-b": {status: 200, body: task},
		"GET /v1/tasks":     {status: 200, body: `{"tasks":[` + task + `]}`},
	})
	out, err := runAdmin(t, addr, tasksCmd, "tasks", "get", "t-b")
	if err != nil || !strings.Contains(out, "pending (blocked)") || !strings.Contains(out, "circuit breaker open, until 2026-01-02T03:04:05Z") {
		t.Fatalf("get output = %q, %v", out, err)
	}
	out, err = runAdmin(t, addr, tasksCmd, "tasks", "list", "--status", "blocked")
	if err != nil || !strings.Contains(out, "pending (blocked)") {
		t.Fatalf("list output = %q, %v", out, err)
	}
	if q := rec.last(t).query; !strings.Contains(q, "status=blocked") {
		t.Fatalf("list query = %q", q)
	}
}

func TestAdminDLQ(t *testing.T) {
	rec, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"GET /v1/dlq":          {status: 200, body: `{"tasks":[{"id":"d-1","shard":0,"status":"dlq","last_answer":{"message":"poison task: bad"}}]}`},
		"POST /v1/dlq/redrive": {status: 200, body: `{"redriven":["d-1"],"count":1}`},
	})
	out, err := runAdmin(t, addr, dlqCmd, "dlq", "list")
	if err != nil || !strings.Contains(out, "d-1") || !strings.Contains(out, "poison task: bad") {
		t.Fatalf("dlq list = %q, %v", out, err)
	}
	out, err = runAdmin(t, addr, dlqCmd, "dlq", "redrive", "d-1", "d-2")
	if err != nil || !strings.Contains(out, "redrove 1 task(s)") {
		t.Fatalf("redrive = %q, %v", out, err)
	}
	if b := string(rec.last(t).body); b != `{"ids":["d-1","d-2"]}` {
		t.Fatalf("redrive body = %s", b)
	}
	// --all pages through the DLQ and redrives what it lists, counting as it
	// goes; a task listed again (the fake keeps answering d-1) is not sent
	// twice, so it ends instead of spinning.
	before := rec.count()
	out, err = runAdmin(t, addr, dlqCmd, "dlq", "redrive", "--all")
	if err != nil || !strings.Contains(out, "redrove 1 task(s)") || string(rec.lastOf(t, "POST", "/v1/dlq/redrive").body) != `{"ids":["d-1"]}` {
		t.Fatalf("redrive --all printed %q and sent %s, %v", out, rec.lastOf(t, "POST", "/v1/dlq/redrive").body, err)
	}
	if n := rec.count() - before; n != 3 { // list, redrive, list (d-1 again: done)
		t.Fatalf("redrive --all made %d requests, want 3", n)
	}
	for _, args := range [][]string{{"dlq", "redrive"}, {"dlq", "redrive", "--all", "d-1"}} {
		if _, err := runAdmin(t, addr, dlqCmd, args...); exitCode(err) != 2 {
			t.Fatalf("%v: exit %d, %v", args, exitCode(err), err)
		}
	}
}
