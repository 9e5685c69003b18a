package node

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"fusebox/dynconfig"
	"fusebox/queue"
	"fusebox/raftstore/raftstoretest"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
	"fusebox/transport"
)

func TestTaskStoreServesTheQueue(t *testing.T) {
	const shards = 4
	rs := raftstoretest.SingleNode(t, "n1", shards)
	ts := NewTaskStore(rs, "n1")
	ctx := t.Context()
	wake, cancel := ts.Subscribe()
	defer cancel()

	req := transport.Request{TaskGroup: "callbacks.Invocation", URL: "http://127.0.0.1:9/cb", Body: []byte("hi")}
	raw, _ := json.Marshal(req)
	out, idx, err := rs.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: []state.NewTask{
		{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: req.TaskGroup, Destination: req.URL, Request: raw},
		{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: req.TaskGroup, Destination: req.URL, Request: json.RawMessage(`{"timeout":"soon"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.WaitForApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("submit did not wake the queue's subscription")
	}
	shard := out[0].Shard
	if ts.Backlog(shard) != 2 {
		t.Fatalf("backlog = %d", ts.Backlog(shard))
	}
	due, next, known := ts.Due(shard, time.Time{}, time.Now().Add(time.Second), 10, nil)
	if !known || !next.IsZero() {
		t.Fatalf("Due's next = %v, %v; want known and none (every task is due)", next, known)
	}
	var got transport.Request
	if len(due) != 2 || due[0].ID != out[0].TaskID || due[0].Status != queue.StatusPending || queue.KeyOf(&due[0]).Destination != "http://127.0.0.1:9" || // the breaker key is the host
		json.Unmarshal(due[0].Request, &got) != nil || string(got.Body) != "hi" || got.URL != req.URL {
		t.Fatalf("due = %+v", due)
	}
	// A request that does not decode reaches the queue as stored (the
	// queue dead-letters it: TestPoisonAndUnknownEndpointRouting).
	if string(due[1].Request) != `{"timeout":"soon"}` {
		t.Fatalf("undecodable request handed over as %s", due[1].Request)
	}
	if got, _, _ := ts.Due(shard, time.Time{}, time.Now(), 10, func(id string) bool { return id == out[0].TaskID }); len(got) != 1 || got[0].ID != out[1].TaskID {
		t.Fatalf("due with skip = %+v", got)
	}

	epoch := rs.Reader().ShardMap().Shards[shard].Epoch
	retryAt := time.Now().Add(time.Hour).UTC()
	results := []queue.Result{
		{TaskID: out[0].TaskID, Status: queue.StatusPending, Attempts: 1, NextAttemptAt: retryAt, Message: "503", HTTPStatus: 503},
		{TaskID: out[1].TaskID, Status: queue.StatusDLQ, Message: "poison task"},
	}
	// A stale epoch: the whole batch refused with the typed error.
	err = ts.Complete(ctx, shard, epoch+1, results)
	var woe *shardmap.WrongOwnerError
	if !errors.As(err, &woe) || woe.Owner != "n1" || woe.Epoch != epoch || !errors.Is(err, shardmap.ErrWrongOwner) {
		t.Fatalf("stale complete = %v", err)
	}
	if ts.Backlog(shard) != 2 {
		t.Fatal("a refused batch changed the backlog")
	}
	if err := ts.Complete(ctx, shard, epoch, results); err != nil {
		t.Fatal(err)
	}
	if next, ok := ts.NextDue(shard, time.Now()); !ok || !next.Equal(retryAt) {
		t.Fatalf("next due = %v %v, want %v", next, ok, retryAt)
	}
	if due, next, known := ts.Due(shard, time.Time{}, time.Now(), 10, nil); ts.Backlog(shard) != 1 || len(due) != 0 || !known || !next.Equal(retryAt) {
		t.Fatalf("after complete: backlog %d, due %d, next %v (known %v), want 1, 0, %v", ts.Backlog(shard), len(due), next, known, retryAt)
	}
	if tk, _ := rs.Reader().Task(out[1].TaskID); tk.Status != state.TaskDLQ {
		t.Fatalf("dead-lettered task = %+v", tk)
	}
	// Terminal results are final: a late duplicate is ignored.
	if err := ts.Complete(ctx, shard, epoch, []queue.Result{{TaskID: out[1].TaskID, Status: queue.StatusSucceeded}}); err != nil {
		t.Fatal(err)
	}
	if tk, _ := rs.Reader().Task(out[1].TaskID); tk.Status != state.TaskDLQ {
		t.Fatalf("terminal task changed: %+v", tk)
	}
}

func TestTaskAPIReadsDynamicLimits(t *testing.T) {
	c := dynconfig.NewCollection(nil)
	defer c.Close()
	api := NewTaskAPI(nil, c)
	if d, p := api.SubmitLimits("ns", "ep"); d != dynconfig.DefaultTaskMaxDestinationBacklog || p != dynconfig.DefaultTaskMaxPendingTasks {
		t.Fatalf("default limits = %d, %d", d, p)
	}
	if got := TaskRetention(c)(); got != dynconfig.DefaultTaskRetention {
		t.Fatalf("default retention = %v", got)
	}
	c.Update([]dynconfig.Entry{
		{Key: dynconfig.KeyTaskMaxDestinationBacklog, Value: json.RawMessage(`25`)},
		{Key: dynconfig.KeyTaskMaxDestinationBacklog, Destination: "http://dead.example", Value: json.RawMessage(`3`)},
		{Key: dynconfig.KeyTaskMaxPendingTasks, Value: json.RawMessage(`1000`)},
		{Key: dynconfig.KeyTaskRetention, Value: json.RawMessage(`"90m"`)},
	})
	if d, p := api.SubmitLimits("ns", "ep"); d != 25 || p != 1000 {
		t.Fatalf("limits = %d, %d, want 25, 1000", d, p)
	}
	if d, _ := api.SubmitLimits("ns", "http://dead.example"); d != 3 {
		t.Fatalf("destination's own limit = %d, want 3", d)
	}
	if got := TaskRetention(c)(); got != 90*time.Minute {
		t.Fatalf("retention = %v, want 90m", got)
	}
}

// A result message longer than the stored limit is cut on a character
// boundary, and invalid UTF-8 in it is replaced: cut inside a character it
// was refused by the FSM (through the JSON fallback, where each stray byte
// grew to three) and the shard's flush retried it forever.
func TestCompleteLongMessageCutOnCharacter(t *testing.T) {
	rs := raftstoretest.SingleNode(t, "n1", 1)
	ts := NewTaskStore(rs, "n1")
	ctx := t.Context()
	req, _ := json.Marshal(transport.Request{TaskGroup: "callbacks.Invocation", URL: "http://127.0.0.1:9/cb"})
	nt := state.NewTask{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:9/cb", Request: req}
	out, idx, err := rs.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: []state.NewTask{nt, nt}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.WaitForApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	epoch := rs.Reader().ShardMap().Shards[0].Epoch
	long := strings.Repeat("a", state.MaxTaskMessageBytes-2) + strings.Repeat("€", 10)
	bad := "answer \xff\xfe " + strings.Repeat("b", state.MaxTaskMessageBytes)
	err = ts.Complete(ctx, 0, epoch, []queue.Result{
		{TaskID: out[0].TaskID, Status: queue.StatusFailed, Message: long},
		{TaskID: out[1].TaskID, Status: queue.StatusFailed, Message: bad},
	})
	if err != nil {
		t.Fatalf("complete with long messages: %v", err)
	}
	for _, o := range out {
		tk, _ := rs.Reader().Task(o.TaskID)
		if tk.Status != state.TaskFailed || len(tk.Message) > state.MaxTaskMessageBytes || !utf8.ValidString(tk.Message) {
			t.Errorf("task %s: status %s, message of %d bytes (valid UTF-8: %v)", o.TaskID, tk.Status, len(tk.Message), utf8.ValidString(tk.Message))
		}
	}
}

// The executor fails a sync output larger than a result may store, so the
// two limits must be one.
func TestOutputLimitsAgree(t *testing.T) {
	if transport.MaxOutputBytes != state.MaxTaskOutputBytes {
		t.Fatalf("transport.MaxOutputBytes %d, state.MaxTaskOutputBytes %d", transport.MaxOutputBytes, state.MaxTaskOutputBytes)
	}
}

// The executor fails a start whose token is longer than
// transport.MaxOperationTokenBytes, and a cancel or completion may carry
// one that long, because that is what a result may record: the Raft
// store's operation_id bound (a literal in the replicated validation,
// which must not change) is held to the constant here.
func TestOperationTokenLimitsAgree(t *testing.T) {
	r := state.TaskResult{TaskID: "t-1", Status: state.TaskSucceeded, Attempts: 1,
		OperationID: strings.Repeat("t", transport.MaxOperationTokenBytes)}
	if err := r.Validate(); err != nil {
		t.Fatalf("a result with a token of transport.MaxOperationTokenBytes refused: %v", err)
	}
	r.OperationID += "t"
	if err := r.Validate(); err == nil || err.Field != "operation_id" {
		t.Fatalf("a result with a token one byte over transport.MaxOperationTokenBytes: %v; want refused", err)
	}
}
