package node

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// tokenServer answers every Nexus start 201 with a token of n bytes and
// accepts every cancel, counting the starts.
func tokenServer(t *testing.T, n int, starts *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/cancel") {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		starts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"token": strings.Repeat("t", n), "state": "running"})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func startSubmit(ep, wf string) api.TaskSubmit {
	return api.TaskSubmit{
		NamespaceID: deliveryNS, WorkflowID: wf, TaskGroup: breakerpool.TaskGroupNexusInvocation, Destination: ep,
		Request: api.TaskRequest{Service: "svc", Operation: "op", Input: json.RawMessage(`{}`)},
	}
}

// A start answered with a token longer than the store keeps (4096 bytes,
// Temporal's limit.operation.token.length) ends failed after one call. The
// Raft store refused the result, the retry without the output kept the
// token and was refused too, and the task was called again forever at the
// full rate. Temporal fails it (ErrInvalidOperationToken, non-retryable).
func TestStartWithOverlongTokenFailsOnce(t *testing.T) {
	var starts atomic.Int32
	srv := tokenServer(t, transport.MaxOperationTokenBytes+1, &starts)
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	putEndpoint(t, c, "ep-long", srv.URL)
	acc, err := n.client().SubmitTask(ctxT(t), startSubmit("ep-long", "wf-long"))
	if err != nil {
		t.Fatal(err)
	}
	tk := waitTask(t, n, acc.TaskID, "ended", func(x api.Task) bool { return x.Status != "pending" })
	if tk.Status != "failed" || tk.Attempts != 1 || tk.OperationID != "" || tk.LastAnswer == nil ||
		!strings.Contains(tk.LastAnswer.Message, "invalid operation token") {
		t.Fatalf("task = %s after %d attempts, operation id of %d bytes, last answer %+v; want failed once, invalid operation token",
			tk.Status, tk.Attempts, len(tk.OperationID), tk.LastAnswer)
	}
	if got := starts.Load(); got != 1 {
		t.Fatalf("destination got %d starts, want 1", got)
	}
}

// A token between 1 KiB and 4 KiB — one Temporal accepts and fusebox's own
// start records — can be cancelled and completed: operation_id and
// completion.operation_token were bounded at 1 KiB, so the cancel of an
// operation fusebox itself started was refused at submit.
func TestRecordedLongTokenCanBeCancelledAndCompleted(t *testing.T) {
	var starts atomic.Int32
	srv := tokenServer(t, 2000, &starts)
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	putEndpoint(t, c, "ep-mid", srv.URL)
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, deliveryNS, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)
	acc, err := n.client().SubmitTask(ctxT(t), startSubmit("ep-mid", "wf-mid"))
	if err != nil {
		t.Fatal(err)
	}
	tk := waitTask(t, n, acc.TaskID, "started", func(x api.Task) bool { return x.Status != "pending" })
	if tk.Status != "succeeded" || len(tk.OperationID) != 2000 {
		t.Fatalf("start: %s, operation_id of %d bytes; want succeeded with the 2000-byte token", tk.Status, len(tk.OperationID))
	}
	cancel := api.TaskSubmit{
		NamespaceID: deliveryNS, WorkflowID: "wf-mid", TaskGroup: breakerpool.TaskGroupNexusCancelation, Destination: "ep-mid",
		Request: api.TaskRequest{Service: "svc", Operation: "op", OperationID: tk.OperationID},
	}
	dest := transporttest.NewDestination(t)
	complete := api.TaskSubmit{
		NamespaceID: deliveryNS, WorkflowID: "wf-mid", TaskGroup: breakerpool.TaskGroupCallback, Destination: dest.CallbackURL(),
		Request: api.TaskRequest{Completion: &transport.Completion{State: transport.CompletionCanceled,
			FailureMessage: "canceled", OperationToken: tk.OperationID}},
	}
	for _, s := range []api.TaskSubmit{cancel, complete} {
		acc, err := n.client().SubmitTask(ctxT(t), s)
		if err != nil {
			t.Fatalf("%s with the %d-byte token fusebox recorded: %v", s.TaskGroup, len(tk.OperationID), err)
		}
		if done := waitTask(t, n, acc.TaskID, "delivered", func(x api.Task) bool { return x.Status != "pending" }); done.Status != "succeeded" {
			t.Fatalf("%s: %s (%+v); want succeeded", s.TaskGroup, done.Status, done.LastAnswer)
		}
	}
	if calls := dest.Calls(); len(calls) != 1 || calls[0].OperationToken != tk.OperationID {
		t.Fatalf("receiver saw %d completions; want one carrying the recorded token", len(calls))
	}
}
