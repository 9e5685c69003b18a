package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"fusebox/breakerpool"
)

// TestTasksSubmitWait follows a task to its end: 0 when the destination
// accepts it; 5 with the answer when it refuses it for good (400).
func TestTasksSubmitWait(t *testing.T) {
	h := newAdminNode(t, 4)
	var status atomic.Int64
	status.Store(200)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(dest.Close)
	args := []string{"tasks", "submit", "--wait", "--timeout", "30s", "--namespace", "ns", "--workflow", "wf",
		"--task-group", breakerpool.TaskGroupCallback, "--destination", dest.URL + "/cb", "--request", `{"body":"eA==","content_type":"text/plain"}`}
	out := h.mustRun("succeeded", args...)
	if !strings.Contains(out, "waiting for it to end") {
		t.Errorf("no progress line:\n%s", out)
	}
	status.Store(400)
	out, err := h.run(args...)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitTaskFailed || !strings.Contains(ee.msg, "failed") || !strings.Contains(ee.msg, "400") {
		t.Fatalf("refused task: %v\n%s; want exit %d naming failed and the 400", err, out, exitTaskFailed)
	}
}

// dlq redrive --watch follows redriven tasks: a callback dead-lettered by a
// narrowed allowlist is redriven once the list is lifted and succeeds.
func TestDLQRedriveWatch(t *testing.T) {
	h := newAdminNode(t, 4)
	var status atomic.Int64
	status.Store(503)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(dest.Close)
	out := h.mustRun("accepted", "tasks", "submit", "--namespace", "ns", "--workflow", "wf", "--task-group", "callbacks.Invocation",
		"--destination", dest.URL+"/cb", "--request", `{"body":"eA==","content_type":"text/plain"}`)
	id := strings.Fields(out)[1]
	h.mustRun("", "config", "set", "component.callbacks.allowedAddresses", `[{"Pattern":"elsewhere.example.com"}]`)
	h.eventually(id, "dlq", "list") // refused at its next attempt
	h.mustRun("", "config", "delete", "component.callbacks.allowedAddresses")
	status.Store(200)
	out = h.mustRun("redrove 1 task(s)", "dlq", "redrive", "--watch", "--timeout", "30s", id)
	if !strings.Contains(out, "redriven tasks: pending 0, succeeded 1, failed 0, dlq 0") {
		t.Fatalf("no final tally:\n%s", out)
	}
}
