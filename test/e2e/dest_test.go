package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/transport/transporttest"
)

// Dest is the destination of the task scenarios: an
// transporttest.Destination (the real Nexus service fusebox-test and the
// callback receiver, switchable between up / refuse / 503 / slow / 400)
// behind a front server that can hold every answer for a while after the
// destination acted on the call. That is what a slow destination does to
// at-least-once delivery: the side effect has happened, the caller does not
// know yet — a caller killed or stopped meanwhile leaves a call that its
// successor will make again (a duplicate, counted by the scenarios).
//
// The front records every call with its Nexus-Request-Id (the task id when
// the task set none), when it arrived, what the destination answered and
// when the answer went back (or the caller went away).
type Dest struct {
	inner   *transporttest.Destination
	srv     *httptest.Server
	hold    atomic.Int64 // nanoseconds each answer is held
	refuse  atomic.Pointer[string]
	closing chan struct{}

	mu    sync.Mutex
	calls []FrontCall
}

// FrontCall is one call seen by a Dest's front.
type FrontCall struct {
	RequestID string
	Path      string
	From      string // the caller's IP address
	Status    int    // the destination's answer
	Arrived   time.Time
	// Answered is when the answer was written back, or the caller went
	// away; zero while held.
	Answered time.Time
	// Abandoned: the caller went away before the answer was sent.
	Abandoned bool
}

// Delivered reports whether the destination accepted the call (2xx): its
// side effect happened, whether or not the caller saw the answer.
func (c FrontCall) Delivered() bool { return c.Status/100 == 2 }

// NewDest starts a Dest in mode up with no hold; it is closed when t ends.
func NewDest(t testing.TB) *Dest {
	t.Helper()
	return NewDestAt(t, "127.0.0.1")
}

// NewDestAt is NewDest listening on host (a free port).
func NewDestAt(t testing.TB, host string) *Dest {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("destination on %s: %v", host, err)
	}
	d := &Dest{inner: transporttest.NewDestination(t), closing: make(chan struct{})}
	d.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: d, ConnState: d.connState}}
	d.srv.Start()
	t.Cleanup(func() {
		close(d.closing) // frees held answers, so Close does not wait them out
		d.srv.Close()
	})
	return d
}

// RefuseFrom makes the destination reset every new connection from ip,
// before any request is read, as a firewall in front of that one caller
// would ("" serves everyone again). Connections already open are kept.
func (d *Dest) RefuseFrom(ip string) { d.refuse.Store(&ip) }

// connState resets a new connection from the refused address.
func (d *Dest) connState(c net.Conn, s http.ConnState) {
	if s != http.StateNew {
		return
	}
	ip := d.refuse.Load()
	if ip == nil || *ip == "" {
		return
	}
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil && host == *ip {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// NexusURL is the Nexus endpoint base URL to register.
func (d *Dest) NexusURL() string { return d.srv.URL + "/nexus" }

// HealthURL is the destination's health check (200 while up).
func (d *Dest) HealthURL() string { return d.srv.URL + "/health" }

// CallbackURL accepts completion callbacks and raw POSTs.
func (d *Dest) CallbackURL() string { return d.srv.URL + "/callback" }

// SetHold makes every answer wait h after the destination acted.
func (d *Dest) SetHold(h time.Duration) { d.hold.Store(int64(h)) }

// SetMode switches the destination's mode (transporttest.Mode*). ModeRefuse
// refuses the inner listener only; use ModeUnavailable to count calls.
func (d *Dest) SetMode(t testing.TB, m transporttest.Mode) {
	t.Helper()
	if err := d.inner.SetMode(m); err != nil {
		t.Fatal(err)
	}
}

// ServeHTTP lets the destination act, records the call, holds the answer,
// then sends it unless the caller went away. A call the destination did not
// answer before the caller gave up (ModeSlow) is recorded with status 0: a
// recorder reports 200 for a handler that wrote nothing, and such calls
// counted as deliveries (a chaos schedule with slow outages reported 206
// duplicate deliveries that were calls abandoned unanswered).
func (d *Dest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	rec.Code = 0 // set by the handler's first WriteHeader or Write
	arrived := time.Now()
	d.inner.ServeHTTP(rec, r)
	if rec.Code == 0 && r.Context().Err() == nil {
		rec.Code = http.StatusOK // net/http answers 200 for a handler that wrote nothing
	}
	d.mu.Lock()
	i := len(d.calls)
	from, _, _ := net.SplitHostPort(r.RemoteAddr)
	d.calls = append(d.calls, FrontCall{RequestID: r.Header.Get("Nexus-Request-Id"), Path: r.URL.Path, From: from, Status: rec.Code, Arrived: arrived})
	d.mu.Unlock()

	gone := rec.Code == 0 // no answer to send: the caller gave up
	if h := time.Duration(d.hold.Load()); h > 0 && !gone {
		timer := time.NewTimer(h)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			gone = true
		case <-d.closing:
		}
		timer.Stop()
	}
	if !gone {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		gone = r.Context().Err() != nil
	}
	d.mu.Lock()
	d.calls[i].Answered, d.calls[i].Abandoned = time.Now(), gone
	d.mu.Unlock()
}

// Calls returns a copy of every call so far, in arrival order.
func (d *Dest) Calls() []FrontCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]FrontCall(nil), d.calls...)
}

// Deliveries counts the delivered (2xx) calls per request id.
func (d *Dest) Deliveries() map[string]int {
	out := map[string]int{}
	for _, c := range d.Calls() {
		if c.Delivered() {
			out[c.RequestID]++
		}
	}
	return out
}

// CallsBetween counts the calls that arrived in [from, to).
func (d *Dest) CallsBetween(from, to time.Time) int {
	n := 0
	for _, c := range d.Calls() {
		if !c.Arrived.Before(from) && c.Arrived.Before(to) {
			n++
		}
	}
	return n
}

// HeldAt returns the request ids of the calls that had arrived at ts and
// whose answer had not gone back yet: calls in flight at ts.
func (d *Dest) HeldAt(ts time.Time) map[string]bool {
	out := map[string]bool{}
	for _, c := range d.Calls() {
		if !c.Arrived.After(ts) && (c.Answered.IsZero() || c.Answered.After(ts)) {
			out[c.RequestID] = true
		}
	}
	return out
}
