package transport_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// A Nexus start tells the handler the time left before its task's deadline
// in Operation-Timeout (Temporal's format, milliseconds: "1234ms"), unless
// the request's own headers set it; without a deadline none is sent.
// Temporal sets nexus.HeaderOperationTimeout to the remaining
// schedule-to-close time (components/nexusoperations/executors.go,
// executeInvocationTask); fusebox sent none.
func TestStartSendsOperationTimeoutFromDeadline(t *testing.T) {
	dest := transporttest.NewDestination(t)
	e := newExecutor(t, transport.Options{})
	start := func(id string) transport.Request {
		r := kindNamed("start").req(dest.NexusURL())
		r.Service, r.Operation, r.RequestID = transporttest.Service, transporttest.OpEcho, id
		return r
	}
	deadline := start("deadline")
	deadline.Deadline = time.Now().Add(time.Hour)
	own := start("own")
	own.Deadline = time.Now().Add(time.Hour)
	own.Header = map[string]string{"operation-TIMEOUT": "5s"}
	for _, r := range []transport.Request{deadline, own, start("none")} {
		if res, err := execute(t, e, r); err != nil {
			t.Fatalf("%s: %v (%+v)", r.RequestID, err, res)
		}
	}
	got := func(id string) string {
		t.Helper()
		calls := dest.CallsWithRequestID(id)
		if len(calls) != 1 {
			t.Fatalf("%s: %d calls", id, len(calls))
		}
		return calls[0].Header.Get("Operation-Timeout")
	}
	v := got("deadline")
	ms, err := strconv.ParseInt(strings.TrimSuffix(v, "ms"), 10, 64)
	if !strings.HasSuffix(v, "ms") || err != nil || ms > time.Hour.Milliseconds() || ms < (time.Hour-time.Minute).Milliseconds() {
		t.Errorf("Operation-Timeout %q with an hour left; want about %dms", v, time.Hour.Milliseconds())
	}
	if v := got("own"); v != "5s" {
		t.Errorf("Operation-Timeout %q; want the request's own 5s", v)
	}
	if v := got("none"); v != "" {
		t.Errorf("Operation-Timeout %q without a deadline; want none", v)
	}
}
