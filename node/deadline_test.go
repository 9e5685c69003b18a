package node

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/queue"
	"fusebox/transport/transporttest"
)

// schedule_to_close_timeout end to end on a real node: a destination that
// answers 302 forever used to keep its task retrying forever; with a 2 s
// timeout the task ends failed, "deadline exceeded". Without one, the
// deadline comes from fusebox.tasks.defaultScheduleToCloseTimeout (0: none);
// bad values are 400s naming the field, with the batch item's index.
func TestScheduleToCloseDeadline(t *testing.T) {
	const ns = "ns-deadline"
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/moved", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)
	submit := func(wf, timeout string) (api.Task, error) {
		ts := callbackTask(srv.URL+"/cb", wf, wf)
		ts.NamespaceID, ts.ScheduleToCloseTimeout = ns, timeout
		acc, err := n.client().SubmitTask(ctxT(t), ts)
		if err != nil {
			return api.Task{}, err
		}
		return n.client().Task(ctxT(t), acc.TaskID)
	}

	tk, err := submit("wf-redirect", "2") // Temporal's reading: 2 s
	if err != nil {
		t.Fatal(err)
	}
	if d := tk.Deadline.Sub(tk.CreatedAt); d != 2*time.Second {
		t.Fatalf("deadline %v after creation, want 2s", d)
	}
	done := waitTask(t, n, tk.ID, "failed at its deadline", func(x api.Task) bool { return x.Status != "pending" })
	if done.Status != "failed" || done.LastAnswer == nil || !strings.HasPrefix(done.LastAnswer.Message, queue.DeadlineExceeded) {
		t.Fatalf("task = %+v (last answer %+v); want failed, deadline exceeded", done, done.LastAnswer)
	}
	if done.CompletedAt.Before(tk.Deadline) || hits.Load() < 1 {
		t.Fatalf("completed %v before the deadline %v, or never called (%d)", done.CompletedAt, tk.Deadline, hits.Load())
	}

	// The default: a week, then the configured value for the namespace, then none.
	tk, err = submit("wf-default", "")
	if err != nil || tk.Deadline.Sub(tk.CreatedAt) != dynconfig.DefaultTaskScheduleToCloseTimeout {
		t.Fatalf("default deadline: %v after creation, %v", tk.Deadline.Sub(tk.CreatedAt), err)
	}
	configSet(t, n, dynconfig.KeyTaskScheduleToCloseTimeout, ns, `"1h"`)
	if tk, err = submit("wf-configured", ""); err != nil || tk.Deadline.Sub(tk.CreatedAt) != time.Hour {
		t.Fatalf("configured deadline: %v after creation, %v", tk.Deadline.Sub(tk.CreatedAt), err)
	}
	configSet(t, n, dynconfig.KeyTaskScheduleToCloseTimeout, ns, `0`)
	if tk, err = submit("wf-none", ""); err != nil || !tk.Deadline.IsZero() {
		t.Fatalf("no deadline: %v, %v", tk.Deadline, err)
	}

	_, err = submit("wf-bad", "soon")
	wantField(t, err, "schedule_to_close_timeout")
	_, err = submit("wf-negative", "-1s")
	wantField(t, err, "schedule_to_close_timeout")
	good, bad := callbackTask(srv.URL+"/cb", "wf-b0", "wf-b0"), callbackTask(srv.URL+"/cb", "wf-b1", "wf-b1")
	good.NamespaceID, bad.NamespaceID, bad.ScheduleToCloseTimeout = ns, ns, "3651d"
	_, err = n.client().SubmitTasks(ctxT(t), []api.TaskSubmit{good, bad})
	wantField(t, err, "tasks[1].schedule_to_close_timeout")
}

// A Nexus start carries its task's time left in Operation-Timeout, from
// the deadline the queue passes to each attempt (never stored): Temporal
// sends the remaining schedule-to-close time (executors.go
// executeInvocationTask); fusebox fixed a deadline but sent none.
func TestStartCarriesOperationTimeoutOfItsDeadline(t *testing.T) {
	dest := transporttest.NewDestination(t)
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	putEndpoint(t, c, "ep-s2c", dest.NexusURL())
	ts := echoTask("ep-s2c", "wf-s2c", "req-s2c")
	ts.ScheduleToCloseTimeout = "1h"
	acc, err := n.client().SubmitTask(ctxT(t), ts)
	if err != nil {
		t.Fatal(err)
	}
	if tk := waitTask(t, n, acc.TaskID, "delivered", func(x api.Task) bool { return x.Status != "pending" }); tk.Status != "succeeded" {
		t.Fatalf("start: %s (%+v)", tk.Status, tk.LastAnswer)
	}
	calls := dest.CallsWithRequestID(acc.TaskID) // the Nexus request id: the task id
	if len(calls) != 1 {
		t.Fatalf("%d starts arrived, want 1", len(calls))
	}
	v := calls[0].Header.Get("Operation-Timeout")
	ms, err := strconv.ParseInt(strings.TrimSuffix(v, "ms"), 10, 64)
	if !strings.HasSuffix(v, "ms") || err != nil || ms > time.Hour.Milliseconds() || ms < (time.Hour-time.Minute).Milliseconds() {
		t.Fatalf("Operation-Timeout %q for a start with an hour left; want about %dms", v, time.Hour.Milliseconds())
	}
}
