package transport_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// barrierHost is a destination that answers a round of calls only once
// every call of it has arrived, so all of them hold a connection at once.
type barrierHost struct {
	srv    *httptest.Server
	opened *atomic.Int64

	mu      sync.Mutex
	want    int
	waiting int
	release chan struct{}
}

func newBarrierHost(t *testing.T) *barrierHost {
	h := &barrierHost{}
	h.srv, h.opened = newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		ch := h.release
		if h.waiting++; h.waiting == h.want {
			close(h.release)
		}
		h.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(30 * time.Second): // fails below: the round did not reach want
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return h
}

// round makes n callbacks through e at once and returns the connections
// the host saw opened meanwhile.
func (h *barrierHost) round(t *testing.T, e *transport.Executor, n int) int64 {
	t.Helper()
	before := h.opened.Load()
	h.mu.Lock()
	h.want, h.waiting, h.release = n, 0, make(chan struct{})
	h.mu.Unlock()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, err := execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: h.srv.URL + "/cb", Body: []byte("x")})
			if err != nil || res.Outcome != transport.OutcomeSucceeded {
				t.Errorf("%+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting != n {
		t.Fatalf("%d calls reached the server, want %d", h.waiting, n)
	}
	return h.opened.Load() - before
}

// TestExecutorKeepsConnectionsForEveryCallInFlight holds 300 callbacks to
// one host in flight at once, twice: the second round must reuse the first
// round's connections and dial none. 300 is three groups at the group
// limiter's default concurrency (many namespaces' callbacks to one Temporal
// frontend). With 100 idle connections per host, the pool closed 200 of the
// first round's connections as their answers came and the second round
// dialled them again.
func TestExecutorKeepsConnectionsForEveryCallInFlight(t *testing.T) {
	const inFlight = 300
	h := newBarrierHost(t)
	e := newExecutor(t, transport.Options{})
	if got := h.round(t, e, inFlight); got != inFlight {
		t.Fatalf("first round opened %d connections, want %d (one per call in flight)", got, inFlight)
	}
	if got := h.round(t, e, inFlight); got != 0 {
		t.Errorf("second round opened %d new connections, want 0: the pool kept fewer than the calls in flight", got)
	}
}

// TestBusyHostKeepsOthersIdleConnections: one host's thousand calls in
// flight leave a thousand idle connections; another host's idle ones must
// stay. With as many idle connections in all as per host, net/http closed
// the other host's to keep to the bound, and its next round dialled every
// connection again (for https, a handshake each).
func TestBusyHostKeepsOthersIdleConnections(t *testing.T) {
	innocent, busy := newBarrierHost(t), newBarrierHost(t)
	e := newExecutor(t, transport.Options{})
	if got := innocent.round(t, e, 50); got != 50 {
		t.Fatalf("first round opened %d connections, want 50", got)
	}
	busy.round(t, e, 1000)
	if got := innocent.round(t, e, 50); got != 0 {
		t.Fatalf("after a busy host's 1,000 calls, the other host's round opened %d new connections, want 0", got)
	}
}

// TestCallbackDrainIsBounded: a receiver that answers 2xx and then a body
// that never ends has answered; the call succeeds once 64 KiB of the body
// are read, instead of reading until its timeout and failing as down (or
// reading a 1 MiB answer to the end on every call).
func TestCallbackDrainIsBounded(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 16<<10))
		for range 8 { // 128 KiB, then nothing more until the test ends
			_, _ = w.Write(chunk)
		}
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	e := newExecutor(t, transport.Options{})
	res, err := execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: srv.URL + "/cb", Body: []byte("x"), Timeout: 5 * time.Second})
	if err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("a 2xx answer whose body goes on: %+v, %v; want succeeded", res, err)
	}
}
