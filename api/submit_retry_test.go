package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"fusebox/raftstore/state"
)

// A retry of a single submit the replicated state refused (429) meets the
// node's backlog check again: while the destination is still full it is
// refused here and adds nothing to the log; once there is room it is
// decided afresh and accepted, and a retry after that gets the same task,
// past the cap its own task filled. Before, the remembered refusal let
// every retry skip the check and be answered the first 429, through a new
// Raft entry each time, until the id was forgotten.
func TestRetryOfRefusedSubmitMeetsTheBacklogCheckAgain(t *testing.T) {
	svc, c := newTaskServer(t)
	svc.max.Store(1)
	if _, err := c.SubmitTask(t.Context(), callback("ns", "fill")); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(callback("ns", "wf"))
	if err != nil {
		t.Fatal(err)
	}
	submit := func() (int, TaskAccepted) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.Addr()+"/v1/tasks", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", "r1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a TaskAccepted
		if resp.StatusCode == http.StatusAccepted {
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, a
	}

	svc.stale.Store(true) // the node's view is behind: the FSM refuses
	if code, _ := submit(); code != http.StatusTooManyRequests {
		t.Fatalf("first attempt: HTTP %d, want 429", code)
	}
	svc.stale.Store(false)
	last := svc.Stats().LastIndex
	if code, _ := submit(); code != http.StatusTooManyRequests {
		t.Fatalf("a retry while the destination is full: HTTP %d, want 429", code)
	}
	if got := svc.Stats().LastIndex; got != last {
		t.Fatalf("a retry refused by the node's check wrote entries %d..%d", last+1, got)
	}
	svc.max.Store(2)
	code, first := submit()
	if code != http.StatusAccepted || first.TaskID == "" {
		t.Fatalf("a retry once there is room: HTTP %d %+v, want 202 with a task", code, first)
	}
	if tk, ok := svc.Task(first.TaskID); !ok || tk.WorkflowID != "wf" {
		t.Fatalf("task %s: %+v (stored %v)", first.TaskID, tk, ok)
	}
	if code, again := submit(); code != http.StatusAccepted || again.TaskID != first.TaskID {
		t.Fatalf("a retry of the accepted submit: HTTP %d %+v, want 202 with %s", code, again, first.TaskID)
	}
	if n := len(svc.ListTasks(state.TaskQuery{Limit: 100})); n != 2 {
		t.Fatalf("%d tasks stored, want 2", n)
	}
}
