package node

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/pgtest"
)

// X-Request-Id makes a caller's retried write apply once, and only its
// own: two tokens that send the same id each get their own write. Before
// ids were scoped by the caller, the second tenant's submit answered 202
// with the first tenant's task id, and its own task was never stored.
func TestRequestIDScopedByCaller(t *testing.T) {
	tokens := map[string]string{
		"tenant-a": "tenant-a-0123456789abcdef0123456789abcdef",
		"tenant-b": "tenant-b-0123456789abcdef0123456789abcdef",
	}
	file := filepath.Join(t.TempDir(), "tokens")
	body := "tenant-a submit " + tokens["tenant-a"] + "\ntenant-b submit " + tokens["tenant-b"] + "\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.AdminTokenFile = file })
	n := c.nodes[0]
	hc := &http.Client{Timeout: 20 * time.Second}
	submit := func(who, wf string) api.TaskAccepted {
		t.Helper()
		b, _ := json.Marshal(callbackTask("http://127.0.0.1:9/cb", wf, ""))
		req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/v1/tasks", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokens[who])
		req.Header.Set("X-Request-Id", "batch-1")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out api.TaskAccepted
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s submit: HTTP %d, %v", who, resp.StatusCode, err)
		}
		return out
	}
	a := submit("tenant-a", "wf-a")
	b := submit("tenant-b", "wf-b")
	if b.TaskID == a.TaskID {
		t.Fatalf("tenant-b's submit with tenant-a's X-Request-Id answered tenant-a's task %s", a.TaskID)
	}
	for who, acc := range map[string]api.TaskAccepted{"tenant-a": a, "tenant-b": b} {
		tk, ok := n.store.Reader().Task(acc.TaskID)
		if !ok {
			t.Fatalf("%s's task %s is not stored", who, acc.TaskID)
		}
		if want := "wf-" + who[len(who)-1:]; tk.WorkflowID != want {
			t.Errorf("%s's task %s has workflow %q, want %q", who, acc.TaskID, tk.WorkflowID, want)
		}
	}
	if again := submit("tenant-a", "wf-a"); again.TaskID != a.TaskID {
		t.Errorf("tenant-a's retry with its X-Request-Id made task %s, want its first %s", again.TaskID, a.TaskID)
	}
}

// An X-Request-Id is one write, on both task stores: reused for another
// body (another namespace's task) or on another route (a batch, then a
// single submit) it is another write, never the first one's answer; a
// retry of an accepted submit, single or batch, is answered with its first
// tasks and stores nothing more, even when that task filled its
// destination's backlog (the API's local check answered 429); and a 429 is
// not the answer a retry gets once there is room. On PostgreSQL the
// X-Request-Id was ignored: every retry stored its tasks again.
func TestRequestIDIsOneWrite(t *testing.T) {
	t.Run(TaskStoreRaft, func(t *testing.T) {
		testRequestIDIsOneWrite(t, newTestCluster(t, 1, nil).nodes[0])
	})
	t.Run(TaskStorePostgres, func(t *testing.T) {
		n := pgNode(t, pgtest.NewDatabase(t))
		waitNodeReady(t, n)
		testRequestIDIsOneWrite(t, n)
	})
}

func testRequestIDIsOneWrite(t *testing.T, n *testNode) {
	const dest = "http://127.0.0.1:9/cb"
	configSet(t, n, dynconfig.KeyTaskMaxDestinationBacklog, "ns-limit", "1")
	hc := &http.Client{Timeout: 20 * time.Second}
	post := func(path, rid string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", rid)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	task := func(ns, wf string) api.TaskSubmit {
		ts := callbackTask(dest, wf, "")
		ts.NamespaceID = ns
		return ts
	}
	accepted := func(code int, body []byte) api.TaskAccepted {
		t.Helper()
		var a api.TaskAccepted
		if code != http.StatusAccepted || json.Unmarshal(body, &a) != nil || a.TaskID == "" {
			t.Fatalf("HTTP %d %s, want 202 with a task", code, body)
		}
		return a
	}
	stored := func(id string) api.Task {
		t.Helper()
		tk, err := n.client().Task(ctxT(t), id)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		if tk.RequestID != "" {
			t.Fatalf("task %s shows request_id %q; it was submitted without one", id, tk.RequestID)
		}
		return tk
	}
	count := func(ns string) int {
		t.Helper()
		l, err := n.client().Tasks(ctxT(t), api.TaskListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for _, tk := range l.Tasks {
			if tk.NamespaceID == ns {
				c++
			}
		}
		return c
	}

	a := accepted(post("/v1/tasks", "k1", task("ns-a", "wf")))
	b := accepted(post("/v1/tasks", "k1", task("ns-b", "wf")))
	if a.TaskID == b.TaskID {
		t.Fatalf("ns-b's submit with ns-a's X-Request-Id answered ns-a's task %s", a.TaskID)
	}
	if tk := stored(b.TaskID); tk.NamespaceID != "ns-b" {
		t.Fatalf("ns-b's task %s: %+v", b.TaskID, tk)
	}
	if again := accepted(post("/v1/tasks", "k1", task("ns-a", "wf"))); again.TaskID != a.TaskID {
		t.Fatalf("the retry made task %s, want the first answer %s", again.TaskID, a.TaskID)
	}
	if got := count("ns-a"); got != 1 {
		t.Fatalf("ns-a holds %d tasks after a submit and its retry, want 1", got)
	}

	batch := api.TaskBatchSubmit{Tasks: []api.TaskSubmit{task("ns-c", "b1"), task("ns-c", "b2")}}
	var first, retry api.TaskBatchAccepted
	for _, into := range []*api.TaskBatchAccepted{&first, &retry} {
		code, body := post("/v1/tasks:batch", "k2", batch)
		if code != http.StatusAccepted || json.Unmarshal(body, into) != nil || len(into.Results) != 2 {
			t.Fatalf("batch: HTTP %d %s", code, body)
		}
	}
	for i := range first.Results {
		if retry.Results[i].TaskID != first.Results[i].TaskID || first.Results[i].TaskID == "" {
			t.Fatalf("batch retry answered %+v, want the first answer %+v", retry.Results, first.Results)
		}
	}
	if got := count("ns-c"); got != 2 {
		t.Fatalf("ns-c holds %d tasks after a batch of 2 and its retry, want 2", got)
	}
	single := accepted(post("/v1/tasks", "k2", task("ns-c", "s1")))
	if tk := stored(single.TaskID); tk.WorkflowID != "s1" {
		t.Fatalf("a single submit reusing a batch's X-Request-Id: task %s is %+v", single.TaskID, tk)
	}

	limited := accepted(post("/v1/tasks", "k3", task("ns-limit", "wf")))
	if again := accepted(post("/v1/tasks", "k3", task("ns-limit", "wf"))); again.TaskID != limited.TaskID {
		t.Fatalf("the retry made task %s, want the first answer %s", again.TaskID, limited.TaskID)
	}
	if code, body := post("/v1/tasks", "k4", task("ns-limit", "wf2")); code != http.StatusTooManyRequests {
		t.Fatalf("a new submit past the backlog: HTTP %d %s, want 429", code, body)
	}
	// Its retry, once there is room, is decided afresh: the 429 is not
	// the answer remembered for the id.
	configSet(t, n, dynconfig.KeyTaskMaxDestinationBacklog, "ns-limit", "10")
	if later := accepted(post("/v1/tasks", "k4", task("ns-limit", "wf2"))); later.TaskID == limited.TaskID {
		t.Fatalf("the retry answered another task %s", later.TaskID)
	}
}
