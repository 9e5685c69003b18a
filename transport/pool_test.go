package transport_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// TestExecutorKeepsConnectionsForEveryCallInFlight holds 300 callbacks to
// one host in flight at once, twice: the second round must reuse the first
// round's connections and dial none. 300 is three groups at the group
// limiter's default concurrency (many namespaces' callbacks to one Temporal
// frontend). With 100 idle connections per host, the pool closed 200 of the
// first round's connections as their answers came and the second round
// dialled them again.
func TestExecutorKeepsConnectionsForEveryCallInFlight(t *testing.T) {
	const inFlight = 300
	var (
		mu      sync.Mutex
		waiting int
		release chan struct{}
	)
	srv, opened := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Answer only once every call of the round is here, so all of them
		// hold a connection at the same time.
		mu.Lock()
		ch := release
		if waiting++; waiting == inFlight {
			close(release)
		}
		mu.Unlock()
		select {
		case <-ch:
		case <-time.After(30 * time.Second): // fails below: the round did not reach inFlight
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	e := newExecutor(t, transport.Options{})

	round := func(n int) {
		mu.Lock()
		waiting, release = 0, make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				res, err := execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: srv.URL + "/cb", Body: []byte("x")})
				if err != nil || res.Outcome != transport.OutcomeSucceeded {
					t.Errorf("round %d: %+v, %v", n, res, err)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if waiting != inFlight {
			t.Fatalf("round %d: %d calls reached the server, want %d", n, waiting, inFlight)
		}
	}
	round(1)
	if got := opened.Load(); got != inFlight {
		t.Fatalf("first round opened %d connections, want %d (one per call in flight)", got, inFlight)
	}
	round(2)
	if got := opened.Load() - inFlight; got != 0 {
		t.Errorf("second round opened %d new connections, want 0: the pool kept fewer than the calls in flight", got)
	}
}
