package node

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/raftstore/state"
)

// A submit the replicated state refused by a backlog limit (429) is not an
// answer its X-Request-Id keeps: a retry with the same id once there is
// room is decided afresh, as the 429's Retry-After asks. Before, the FSM's
// refusal was remembered like any result and every retry with the id got
// the same 429 until the dedup window passed. Submits go through a
// follower (forwarded to the leader) and a retry also through the leader:
// the id is the same write on every node. Accepted tasks of a batch keep
// their answer, and retries of one request, concurrent or not, store its
// tasks once.
// reply is an HTTP answer's status and body.
type reply struct {
	code int
	body []byte
}

func TestRetryOfRefusedSubmitIsDecidedAfresh(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader(c.nodes)
	f := others(c.nodes, l)[0]
	const dest = "http://127.0.0.1:9/cb"
	hc := &http.Client{Timeout: 20 * time.Second}
	post := func(t *testing.T, n *testNode, path, rid string, body any) reply {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if rid != "" {
			req.Header.Set("X-Request-Id", rid)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Error(err)
			return reply{}
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return reply{resp.StatusCode, out}
	}
	task := func(ns, wf, reqID string) api.TaskSubmit {
		ts := callbackTask(dest, wf, reqID)
		ts.NamespaceID = ns
		return ts
	}
	accepted := func(t *testing.T, r reply) api.TaskAccepted {
		t.Helper()
		var a api.TaskAccepted
		if r.code != http.StatusAccepted || json.Unmarshal(r.body, &a) != nil || a.TaskID == "" {
			t.Fatalf("HTTP %d %s, want 202 with a task", r.code, r.body)
		}
		return a
	}
	batch := func(t *testing.T, r reply) []api.TaskBatchItem {
		t.Helper()
		var a api.TaskBatchAccepted
		if r.code != http.StatusAccepted || json.Unmarshal(r.body, &a) != nil {
			t.Fatalf("batch: HTTP %d %s, want 202", r.code, r.body)
		}
		return a.Results
	}
	refused := func(t *testing.T, r reply) {
		t.Helper()
		var e struct{ Error api.Error }
		if r.code != http.StatusTooManyRequests || json.Unmarshal(r.body, &e) != nil || e.Error.Key != dynconfig.KeyTaskMaxDestinationBacklog {
			t.Fatalf("HTTP %d %s, want 429 naming %s", r.code, r.body, dynconfig.KeyTaskMaxDestinationBacklog)
		}
	}
	// tasksOf is every task of ns on the leader, which applied every
	// write answered.
	tasksOf := func(t *testing.T, ns string) map[string]state.Task {
		t.Helper()
		ts, _ := l.store.Reader().ListTasksPage(state.TaskQuery{Limit: 1000})
		out := map[string]state.Task{}
		for _, tk := range ts {
			if tk.NamespaceID == ns {
				out[tk.ID] = tk
			}
		}
		return out
	}

	t.Run("single", func(t *testing.T) {
		const ns = "ns-retry-single"
		configSet(t, f, dynconfig.KeyTaskMaxDestinationBacklog, ns, "1")
		accepted(t, post(t, f, "/v1/tasks", "", task(ns, "fill", "")))
		// The task's own request_id sends it past the node's local
		// backlog check: the replicated state refuses it, as it does
		// a submit whose node's view was behind.
		tk := task(ns, "wf", "task-1")
		refused(t, post(t, f, "/v1/tasks", "r-single", tk))
		configSet(t, f, dynconfig.KeyTaskMaxDestinationBacklog, ns, "10")
		first := accepted(t, post(t, f, "/v1/tasks", "r-single", tk))
		if again := accepted(t, post(t, l, "/v1/tasks", "r-single", tk)); again.TaskID != first.TaskID {
			t.Fatalf("a second retry (through the leader) answered task %s, want %s", again.TaskID, first.TaskID)
		}
		if got := tasksOf(t, ns); len(got) != 2 || got[first.TaskID].WorkflowID != "wf" {
			t.Fatalf("tasks of %s: %v, want the fill and %s", ns, got, first.TaskID)
		}
	})

	t.Run("batch", func(t *testing.T) {
		const ns = "ns-retry-batch"
		configSet(t, f, dynconfig.KeyTaskMaxDestinationBacklog, ns, "2")
		in := api.TaskBatchSubmit{Tasks: []api.TaskSubmit{task(ns, "b0", ""), task(ns, "b1", ""), task(ns, "b2", ""), task(ns, "b3", "")}}
		first := batch(t, post(t, f, "/v1/tasks:batch", "r-batch", in))
		for i, o := range first {
			if want := []string{state.SubmitAccepted, state.SubmitAccepted, state.SubmitOverloaded, state.SubmitOverloaded}[i]; o.Outcome != want {
				t.Fatalf("first attempt: results %+v, want two accepted then two overloaded", first)
			}
		}
		configSet(t, f, dynconfig.KeyTaskMaxDestinationBacklog, ns, "10")
		retry := batch(t, post(t, f, "/v1/tasks:batch", "r-batch", in))
		for i, o := range retry {
			switch {
			case o.Outcome != state.SubmitAccepted || o.TaskID == "":
				t.Fatalf("retry: results %+v, want every task accepted", retry)
			case i < 2 && o.TaskID != first[i].TaskID:
				t.Fatalf("retry: task %d is %s, want the first attempt's %s", i, o.TaskID, first[i].TaskID)
			}
		}
		again := batch(t, post(t, l, "/v1/tasks:batch", "r-batch", in))
		for i, o := range again {
			if o != retry[i] {
				t.Fatalf("a second retry (through the leader): %+v, want %+v", again, retry)
			}
		}
		got := tasksOf(t, ns)
		for i, o := range retry {
			if got[o.TaskID].WorkflowID != in.Tasks[i].WorkflowID {
				t.Fatalf("task %s of item %d: %+v", o.TaskID, i, got[o.TaskID])
			}
		}
		if len(got) != 4 {
			t.Fatalf("%d tasks stored for %s, want 4", len(got), ns)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		// No task request_id here: only the X-Request-Id keeps the two
		// retries to one task.
		const ns = "ns-retry-twice"
		configSet(t, f, dynconfig.KeyTaskMaxDestinationBacklog, ns, "1")
		in := api.TaskBatchSubmit{Tasks: []api.TaskSubmit{task(ns, "c0", ""), task(ns, "c1", "")}}
		first := batch(t, post(t, f, "/v1/tasks:batch", "r-twice", in))
		if first[0].Outcome != state.SubmitAccepted || first[1].Outcome != state.SubmitOverloaded {
			t.Fatalf("first attempt: results %+v, want accepted then overloaded", first)
		}
		configSet(t, f, dynconfig.KeyTaskMaxDestinationBacklog, ns, "10")
		var wg sync.WaitGroup
		answers := make([][]api.TaskBatchItem, 2)
		for i, n := range []*testNode{f, l} {
			wg.Go(func() {
				r := post(t, n, "/v1/tasks:batch", "r-twice", in)
				var a api.TaskBatchAccepted
				if r.code != http.StatusAccepted || json.Unmarshal(r.body, &a) != nil {
					t.Errorf("retry through %s: HTTP %d %s", n.cfg.NodeID, r.code, r.body)
				}
				answers[i] = a.Results
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		third := batch(t, post(t, f, "/v1/tasks:batch", "r-twice", in))
		for _, a := range append(answers, third) {
			if len(a) != 2 || a[0] != first[0] || a[1].Outcome != state.SubmitAccepted || a[1].TaskID != answers[0][1].TaskID {
				t.Fatalf("retries answered %+v, %+v and %+v; want the first task kept and one new task for the second", answers[0], answers[1], third)
			}
		}
		if got := tasksOf(t, ns); len(got) != 2 {
			t.Fatalf("%d tasks stored for %s after three retries, want 2: %v", len(got), ns, got)
		}
	})
}
