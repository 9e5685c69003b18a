package transport_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/transport"
)

// closedPortURL returns the URL of a loopback port nobody listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

func TestConnectionRefusedIsDown(t *testing.T) {
	e := newExecutor(t, transport.Options{})
	base := closedPortURL(t)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			res, err := execute(t, e, k.req(base))
			checkOutcome(t, res, err, true, 0)
			if !strings.HasPrefix(res.Message, "transport error") || strings.Contains(res.Message, base) {
				t.Errorf("Message = %q (want a transport error that does not echo the URL)", res.Message)
			}
		})
	}
}

// blockingServer holds every request until the client gives up or the test
// ends; if headersFirst, it sends 200 headers and part of a body first.
func blockingServer(t *testing.T, headersFirst bool) (string, *atomic.Int32) {
	t.Helper()
	release := make(chan struct{})
	var n atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if headersFirst {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"partial":`))
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv.URL, &n
}

func TestTimeoutIsDown(t *testing.T) {
	base, _ := blockingServer(t, false)
	e := newExecutor(t, transport.Options{})
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			r := k.req(base)
			r.Timeout = 50 * time.Millisecond
			res, err := execute(t, e, r)
			checkOutcome(t, res, err, true, 0)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(res.Message, "within 50ms") {
				t.Errorf("err %v, Message %q", err, res.Message)
			}
		})
	}
}

func TestTimeoutMidBodyIsDown(t *testing.T) {
	base, _ := blockingServer(t, true)
	e := newExecutor(t, transport.Options{})
	r := kindNamed("start").req(base)
	r.Timeout = 50 * time.Millisecond
	res, err := execute(t, e, r)
	checkOutcome(t, res, err, true, 200)
}

func TestCallerCancelIsAborted(t *testing.T) {
	base, n := blockingServer(t, false)
	e := newExecutor(t, transport.Options{})
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			before := n.Load()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			var res transport.Result
			var err error
			go func() {
				defer close(done)
				res, err = e.Execute(ctx, k.req(base))
			}()
			testwait.For(t, 10*time.Second, "the condition", func() bool { return n.Load() > before })
			cancel()
			<-done
			var fe *transport.FailedError
			if res.Outcome != transport.OutcomeAborted || breakerpool.IsDestinationDown(err) ||
				errors.As(err, &fe) || !errors.Is(err, context.Canceled) {
				t.Fatalf("got %+v, %v; want aborted wrapping context.Canceled", res, err)
			}
		})
	}
}

func TestOversizeResponses(t *testing.T) {
	const limit = 1024
	body := func(n int) string { return `{"pad":"` + strings.Repeat("x", n-10) + `"}` }
	serve := func(status int, b string, chunked bool) string {
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if chunked {
				w.WriteHeader(status)
				for i := 0; i < len(b); i += 100 {
					_, _ = w.Write([]byte(b[i:min(i+100, len(b))]))
					w.(http.Flusher).Flush()
				}
				return
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(b))
		}))
		return srv.URL
	}
	e := newExecutor(t, transport.Options{MaxResponseBytes: limit})
	for _, chunked := range []bool{false, true} {
		name := map[bool]string{false: "sized", true: "chunked"}[chunked]
		t.Run(name+"/start-200-too-large", func(t *testing.T) {
			res, err := execute(t, e, kindNamed("start").req(serve(200, body(limit+1), chunked)))
			checkOutcome(t, res, err, false, 200)
			if !strings.Contains(res.Message, "too large") || res.Output != nil {
				t.Errorf("got %+v", res)
			}
		})
		t.Run(name+"/start-200-at-limit", func(t *testing.T) {
			b := body(limit)
			res, err := execute(t, e, kindNamed("start").req(serve(200, b, chunked)))
			if err != nil || string(res.Output) != b {
				t.Fatalf("got %v, output %d bytes", err, len(res.Output))
			}
		})
		t.Run(name+"/start-503-too-large", func(t *testing.T) {
			res, err := execute(t, e, kindNamed("start").req(serve(503, body(10*limit), chunked)))
			checkOutcome(t, res, err, true, 503)
		})
		t.Run(name+"/start-400-too-large", func(t *testing.T) {
			res, err := execute(t, e, kindNamed("start").req(serve(400, body(10*limit), chunked)))
			checkOutcome(t, res, err, false, 400)
		})
		t.Run(name+"/callback-200-too-large", func(t *testing.T) {
			// A callback needs no response body: accepted is accepted.
			res, err := execute(t, e, kindNamed("raw-callback").req(serve(200, body(10*limit), chunked)))
			if err != nil || res.Outcome != transport.OutcomeSucceeded {
				t.Fatalf("got %+v, %v", res, err)
			}
		})
		t.Run(name+"/callback-500-too-large", func(t *testing.T) {
			res, err := execute(t, e, kindNamed("raw-callback").req(serve(500, body(10*limit), chunked)))
			checkOutcome(t, res, err, true, 500)
			if len(res.Message) > 1100 {
				t.Errorf("Message is %d bytes", len(res.Message))
			}
		})
	}
}

func TestNonJSONSyncOutput(t *testing.T) {
	for _, c := range []struct{ ctype, body, want string }{
		{"text/plain", "hello", `"hello"`},
		{"application/octet-stream", "\x00\x01", `"AAE="`},
		{"application/json", "not json", `"bm90IGpzb24="`},
	} {
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", c.ctype)
			_, _ = w.Write([]byte(c.body))
		}))
		e := newExecutor(t, transport.Options{})
		res, err := execute(t, e, kindNamed("start").req(srv.URL))
		if err != nil || string(res.Output) != c.want || res.OutputContentType != c.ctype {
			t.Errorf("%s: got %+v, %v; want output %s", c.ctype, res, err, c.want)
		}
	}
}

func TestConnectionsAreReused(t *testing.T) {
	srv, conns := newCountingServer(t, statusHandler(503, ""))
	e := newExecutor(t, transport.Options{})
	for _, k := range kinds {
		for range 5 {
			_, _ = execute(t, e, k.req(srv.URL))
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 20 sequential calls, want 1 (bodies drained, keep-alive)", n)
	}
}

func TestClosedExecutor(t *testing.T) {
	srv := newServer(t, statusHandler(200, ""))
	e := newExecutor(t, transport.Options{})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	res, err := execute(t, e, kindNamed("raw-callback").req(srv.URL))
	if !errors.Is(err, transport.ErrClosed) || res.Outcome != transport.OutcomeAborted || breakerpool.IsDestinationDown(err) {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestInvalidRequestFailsWithoutCalling(t *testing.T) {
	var calls atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	e := newExecutor(t, transport.Options{})
	r := kindNamed("start").req(srv.URL)
	r.Service = ""
	res, err := execute(t, e, r)
	var ve *transport.ValidationError
	if res.Outcome != transport.OutcomeFailed || !errors.As(err, &ve) || ve.Field != "service" || breakerpool.IsDestinationDown(err) {
		t.Fatalf("got %+v, %v", res, err)
	}
	if calls.Load() != 0 {
		t.Error("invalid request reached the destination")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newExecutor(t, transport.Options{Registerer: reg})
	up := newServer(t, statusHandler(200, ""))
	down := newServer(t, statusHandler(503, ""))
	_, _ = execute(t, e, kindNamed("raw-callback").req(up.URL))
	_, _ = execute(t, e, kindNamed("raw-callback").req(down.URL))
	_, _ = execute(t, e, kindNamed("raw-callback").req(down.URL))
	_, _ = execute(t, e, transport.Request{TaskGroup: "bogus"})
	if _, err := transport.New(transport.Options{Registerer: reg}); err == nil {
		t.Error("second executor on the same registry: want duplicate registration error")
	}
	body := `
# HELP fusebox_outbound_attempts_total Outbound attempts by task group and outcome (succeeded, started, failed, down, aborted).
# TYPE fusebox_outbound_attempts_total counter
fusebox_outbound_attempts_total{outcome="down",task_group="callbacks.Invocation"} 2
fusebox_outbound_attempts_total{outcome="failed",task_group="invalid"} 1
fusebox_outbound_attempts_total{outcome="succeeded",task_group="callbacks.Invocation"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(body), "fusebox_outbound_attempts_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "fusebox_outbound_attempt_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want 2", n)
	}
}

// A sync output that fit the read limit but grows past what a result may
// store once made JSON (base64 for bytes, escapes for text) fails the
// attempt as too large, as a body over the limit does: stored, the whole
// shard's result batch was refused and retried forever.
func TestSyncOutputTooLargeAsJSON(t *testing.T) {
	for _, c := range []struct {
		ctype string
		body  []byte
	}{
		{"application/octet-stream", bytes.Repeat([]byte{0xAB}, 800<<10)},
		{"text/plain", bytes.Repeat([]byte("<"), 200<<10)},
	} {
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", c.ctype)
			_, _ = w.Write(c.body)
		}))
		e := newExecutor(t, transport.Options{})
		res, err := execute(t, e, kindNamed("start").req(srv.URL))
		checkOutcome(t, res, err, false, 200)
		if len(res.Output) > transport.MaxOutputBytes || !strings.Contains(res.Message, "too large") {
			t.Errorf("%s: output %d bytes, message %q", c.ctype, len(res.Output), res.Message)
		}
	}
}
