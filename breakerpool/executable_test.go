package breakerpool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
)

// httpExecutable posts to a real server and classifies the answer as the
// outbound executors do: 5xx is destination down, 4xx is not.
type httpExecutable struct{ url string }

var errBadRequest = errors.New("bad request")

func (h httpExecutable) Execute(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return NewDestinationDownError("transport", err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 500:
		return NewDestinationDownError("", fmt.Errorf("status %d", resp.StatusCode))
	case resp.StatusCode >= 400:
		return errBadRequest
	}
	return nil
}

func TestExecutableAgainstHTTPServer(t *testing.T) {
	var mu sync.Mutex
	status, hits := http.StatusServiceUnavailable, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		hits++
		w.WriteHeader(status)
	}))
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()
	setStatus := func(s int) { mu.Lock(); status = s; mu.Unlock() }
	getHits := func() int { mu.Lock(); defer mu.Unlock(); return hits }

	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	e := NewCircuitBreakerExecutable(b, httpExecutable{srv.URL})
	ctx := context.Background()
	for i := range 6 {
		err := e.Execute(ctx)
		if IsDestinationDown(err) || err == nil || err.Error() != "status 503" {
			t.Fatalf("call %d: want the unwrapped cause, got %v", i, err)
		}
	}
	if b.State() != open || getHits() != 6 {
		t.Fatalf("state %v, hits %d", b.State(), getHits())
	}
	err := e.Execute(ctx)
	var re *ResourceExhaustedError
	if !errors.As(err, &re) || re.Cause != CauseCircuitBreakerOpen || getHits() != 6 {
		t.Fatalf("open: err %v, hits %d", err, getHits())
	}
	if !errors.Is(fmt.Errorf("task 7: %w", err), ErrCircuitBreakerOpen) {
		t.Fatal("rejection not found through wrapping")
	}
	if n := testutil.ToFloat64(p.dropped); n != 0 {
		t.Fatal(n)
	}
	if b.blocked.Load() != 1 {
		t.Fatalf("blocked %d", b.blocked.Load())
	}

	// 4xx is the task's problem, not the destination's: a success for the breaker.
	setStatus(http.StatusBadRequest)
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == half })
	if err := e.Execute(ctx); !errors.Is(err, errBadRequest) {
		t.Fatal(err)
	}
	if b.State() != closed {
		t.Fatalf("state %v after a 400 probe", b.State())
	}
}

func TestExecutableOutcomes(t *testing.T) {
	p := newTestPool(t, DefaultSettings(), Config{})
	ctx := context.Background()
	cause := errors.New("connection refused")
	other := errors.New("operation failed")
	cases := []struct {
		name     string
		exec     ExecutableFunc
		want     error
		failures uint32
	}{
		{"success", func(context.Context) error { return nil }, nil, 0},
		{"other error is a success", func(context.Context) error { return other }, other, 0},
		{"destination down", func(context.Context) error { return NewDestinationDownError("dial", cause) }, cause, 1},
		{"wrapped destination down", func(context.Context) error {
			return fmt.Errorf("attempt 3: %w", NewDestinationDownError("dial", cause))
		}, cause, 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := p.Get(Key{TaskGroup: "g", NamespaceID: "n", Destination: fmt.Sprint(i)})
			err := NewCircuitBreakerExecutable(b, tc.exec).Execute(ctx)
			if err != tc.want {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			c := b.Counts()
			if c.TotalFailures != tc.failures || c.TotalSuccesses+c.TotalFailures != 1 {
				t.Fatalf("counts %+v", c)
			}
		})
	}
	// A DestinationDownError without a cause is returned as is.
	b := p.Get(keyB)
	dd := NewDestinationDownError("timeout", nil)
	if err := NewCircuitBreakerExecutable(b, ExecutableFunc(func(context.Context) error { return dd })).Execute(ctx); err != dd {
		t.Fatal(err)
	}
}

func TestExecutablePanicAndGoexit(t *testing.T) {
	p := newTestPool(t, DefaultSettings(), Config{})
	b := p.Get(keyA)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		NewCircuitBreakerExecutable(b, ExecutableFunc(func(context.Context) error { panic("boom") })).Execute(context.Background())
		t.Fatal("panic swallowed")
	}()
	if c := b.Counts(); c.TotalFailures != 1 || c.Requests != 1 {
		t.Fatalf("panic not reported as failure: %+v", c)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		NewCircuitBreakerExecutable(b, ExecutableFunc(func(context.Context) error { runtime.Goexit(); return nil })).Execute(context.Background())
	}()
	<-exited
	if c := b.Counts(); c.TotalFailures != 2 || c.Requests != 2 {
		t.Fatalf("Goexit not reported as failure: %+v", c)
	}
}

// plainBreaker is a TwoStepCircuitBreaker that is not a *Breaker.
type plainBreaker struct{ TwoStepCircuitBreaker }

func (plainBreaker) Allow() (func(bool), error) { return nil, errors.New("no") }

func TestExecutableWrapsForeignRejection(t *testing.T) {
	called := false
	err := NewCircuitBreakerExecutable(plainBreaker{}, ExecutableFunc(func(context.Context) error {
		called = true
		return nil
	})).Execute(context.Background())
	var re *ResourceExhaustedError
	if called || !errors.As(err, &re) || re.Cause != CauseCircuitBreakerOpen || re.Err.Error() != "no" {
		t.Fatalf("called %v, err %v", called, err)
	}
}
