package transport_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"fusebox/breakerpool"
	"fusebox/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newExecutor returns an executor closed at the end of the test.
func newExecutor(t testing.TB, opts transport.Options) *transport.Executor {
	t.Helper()
	e, err := transport.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// newServer starts an httptest server closed at the end of the test.
func newServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newCountingServer is newServer counting the connections it accepts.
func newCountingServer(t testing.TB, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &opened
}

// kind is one of the three executors, with a valid request against base.
type kind struct {
	name string
	req  func(base string) transport.Request
}

var kinds = []kind{
	{"start", func(base string) transport.Request {
		return transport.Request{
			TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: base,
			Service: "svc", Operation: "op", RequestID: "req-1", Input: []byte(`{"x":1}`),
		}
	}},
	{"cancel", func(base string) transport.Request {
		return transport.Request{
			TaskGroup: breakerpool.TaskGroupNexusCancelation, URL: base,
			Service: "svc", Operation: "op", OperationID: "tok-1", RequestID: "req-1",
		}
	}},
	{"callback", func(base string) transport.Request {
		return transport.Request{
			TaskGroup: breakerpool.TaskGroupCallback, URL: base + "/cb",
			Completion: &transport.Completion{State: transport.CompletionSucceeded, Result: []byte(`{"ok":true}`)},
		}
	}},
	{"raw-callback", func(base string) transport.Request {
		return transport.Request{
			TaskGroup: breakerpool.TaskGroupCallback, URL: base + "/cb",
			Body: []byte("hello"), ContentType: "text/plain",
		}
	}},
}

func execute(t testing.TB, e *transport.Executor, r transport.Request) (transport.Result, error) {
	t.Helper()
	return e.Execute(context.Background(), r)
}
