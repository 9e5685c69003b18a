// Package transporttest provides a real test destination for fusebox's
// outbound calls: an HTTP server on loopback hosting a Nexus service and a
// callback receiver, switchable between healthy and the failure modes the
// breaker must see, recording every request. It is for tests only.
package transporttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Nexus names served by a Destination.
const (
	Service = "fusebox-test"
	OpEcho  = "echo"  // sync: returns its JSON input
	OpAsync = "async" // async: token "op-" + request id; cancel accepts any token
	OpFail  = "fail"  // sync: operation failed (HTTP 424)
)

// Mode is how a Destination answers.
type Mode int

// Modes of a Destination.
const (
	ModeUp          Mode = iota // serve normally
	ModeRefuse                  // listener closed: connections are refused
	ModeUnavailable             // every request gets 503
	ModeSlow                    // hold every request until the client gives up
	ModeBadRequest              // every request gets 400
	// ModeTooManyRequests answers 429 with the Retry-After header set by
	// SetRetryAfter (none while it is "").
	ModeTooManyRequests
)

var modeNames = [...]string{"up", "refuse", "unavailable", "slow", "bad-request", "too-many-requests"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Kind is what a recorded request was.
type Kind string

// Kinds of recorded requests.
const (
	KindStart    Kind = "start"
	KindCancel   Kind = "cancel"
	KindCallback Kind = "callback"
	// KindHealth is a GET of HealthURL (an active health check).
	KindHealth Kind = "health"
	KindOther  Kind = "other"
)

// maxRecordedBody bounds each recorded body; maxSlow bounds a slow request.
const (
	maxRecordedBody = 1 << 20
	maxSlow         = time.Minute
)

// Call is one request the Destination received.
type Call struct {
	Kind           Kind
	Service        string // start, cancel
	Operation      string // start, cancel
	RequestID      string // Nexus-Request-Id header
	OperationToken string // cancel, or a completion's token
	State          string // completion state; "" for raw callbacks
	ContentType    string
	Body           []byte // start input or callback body
	Header         http.Header
	Mode           Mode // mode when the request arrived
	Status         int  // status answered; 0 if the client went away first
	At             time.Time
}

// Destination is a real HTTP destination on 127.0.0.1. It is safe for
// concurrent use; Close releases everything, including held slow requests.
type Destination struct {
	addr  string
	nexus http.Handler
	comp  http.Handler
	srv   *http.Server

	modeMu sync.Mutex // serializes SetMode

	mu        sync.Mutex
	mode      Mode
	ln        net.Listener  // nil while refusing
	serveDone chan struct{} // closed when the current Serve returns
	conns     map[net.Conn]struct{}
	calls     callLog
	countOnly bool // CountOnly: calls are counted, not kept
	closed    bool
	inFlight  int
	handlers  sync.WaitGroup // in-flight requests; Add only under mu while !closed
	release   chan struct{}  // closed by Close: frees slow requests

	retryAfter atomic.Pointer[string] // Retry-After of ModeTooManyRequests

	// refuseFrom is the source IP RefuseFrom resets (nil: none); stored
	// under mu, so that RefuseFrom's sweep of conns and connState's
	// check of a new connection cannot miss one another.
	refuseFrom atomic.Pointer[netip.Addr]
	refused    atomic.Int64 // connections reset for refuseFrom
}

// New starts a Destination in ModeUp on a free loopback port.
func New() (*Destination, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &Destination{
		addr:    ln.Addr().String(),
		conns:   make(map[net.Conn]struct{}),
		release: make(chan struct{}),
	}
	if d.nexus, err = newNexusHandler(); err != nil {
		_ = ln.Close()
		return nil, err
	}
	d.comp = newCompletionHandler()
	d.srv = &http.Server{
		Handler:           d,
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         d.connState,
	}
	d.serve(ln)
	return d, nil
}

// NewDestination starts a Destination closed when tb ends.
func NewDestination(tb testing.TB) *Destination {
	tb.Helper()
	d, err := New()
	if err != nil {
		tb.Fatalf("transporttest: %v", err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// Addr is the destination's host:port; it survives ModeRefuse.
func (d *Destination) Addr() string { return d.addr }

// NexusURL is the base URL of the Nexus endpoint (service Service).
func (d *Destination) NexusURL() string { return "http://" + d.addr + "/nexus" }

// HealthURL is the destination's health check: 200 in ModeUp, the mode's
// failure otherwise.
func (d *Destination) HealthURL() string { return "http://" + d.addr + "/health" }

// CallbackURL is a URL accepting completion callbacks and raw POSTs.
func (d *Destination) CallbackURL() string { return "http://" + d.addr + "/callback" }

// serve starts serving ln; d.mu must be held or d not yet shared.
func (d *Destination) serve(ln net.Listener) {
	done := make(chan struct{})
	d.ln, d.serveDone = ln, done
	go func() {
		defer close(done)
		_ = d.srv.Serve(refusingListener{ln, d}) // returns when ln is closed
	}()
}

// Mode returns the current mode.
func (d *Destination) Mode() Mode {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mode
}

// SetRetryAfter sets the Retry-After header value ModeTooManyRequests
// answers with, verbatim (delta-seconds, an HTTP date, or garbage); ""
// sends none.
func (d *Destination) SetRetryAfter(v string) { d.retryAfter.Store(&v) }

// SetMode switches how the destination answers. Entering ModeRefuse closes
// the listener and every open connection; leaving it listens again on the
// same address (an error if the port was taken meanwhile).
func (d *Destination) SetMode(m Mode) error {
	if m < ModeUp || m > ModeTooManyRequests {
		return fmt.Errorf("transporttest: unknown mode %d", int(m))
	}
	d.modeMu.Lock()
	defer d.modeMu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errors.New("transporttest: destination closed")
	}
	ln, done := d.ln, d.serveDone
	switch {
	case m == ModeRefuse && ln != nil:
		// Not under mu while waiting: Serve's accept loop calls connState.
		d.ln, d.mode = nil, m
		d.mu.Unlock()
		_ = ln.Close()
		<-done
		d.mu.Lock()
		for c := range d.conns {
			_ = c.Close()
		}
		d.mu.Unlock()
		return nil
	case m != ModeRefuse && ln == nil:
		ln, err := listenAgain(d.addr)
		if err != nil {
			d.mu.Unlock()
			return err
		}
		d.serve(ln)
	}
	d.mode = m
	d.mu.Unlock()
	return nil
}

// listenAgain rebinds addr, retrying briefly: the kernel may still hold it.
func listenAgain(addr string) (net.Listener, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				err = fmt.Errorf("transporttest: reopen %s: %w", addr, err)
			}
			return ln, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *Destination) connState(c net.Conn, s http.ConnState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch s {
	case http.StateNew:
		if d.ln == nil || d.closed { // accepted just before refusing
			_ = c.Close()
			return
		}
		if d.refusedConn(c) { // accepted just before RefuseFrom swept conns
			return
		}
		d.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(d.conns, c)
	}
}

// Close stops the server, frees slow requests and waits for every handler.
// It is idempotent.
func (d *Destination) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.release)
	done := d.serveDone
	d.mu.Unlock()
	err := d.srv.Close() // listener and all connections
	<-done
	d.handlers.Wait()
	return err
}

// Calls returns a copy of every request received so far, in arrival order.
func (d *Destination) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls.all()
}

// CallsWithRequestID returns the requests that carried request id id.
func (d *Destination) CallsWithRequestID(id string) []Call {
	var out []Call
	for _, c := range d.Calls() {
		if c.RequestID == id {
			out = append(out, c)
		}
	}
	return out
}

// Count returns how many requests of kind k arrived ("" counts all).
func (d *Destination) Count(k Kind) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k == "" {
		return d.calls.n
	}
	return d.calls.byKind[k]
}

// InFlight returns how many requests are being handled right now (a slow
// request is in flight until the client gives up or Close).
func (d *Destination) InFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlight
}

// Reset forgets the recorded requests.
func (d *Destination) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = callLog{}
}

// ServeHTTP records the request and answers according to the mode.
func (d *Destination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	d.handlers.Add(1)
	d.inFlight++
	mode, keep := d.mode, !d.countOnly
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inFlight--
		d.mu.Unlock()
		d.handlers.Done()
	}()

	body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody+1))
	if err != nil || len(body) > maxRecordedBody {
		http.Error(w, "unreadable or oversized body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	call := describe(r, body, keep)
	call.Mode = mode
	sw := &statusWriter{ResponseWriter: w}
	defer func() { d.record(call, sw.status) }()

	switch mode {
	case ModeRefuse:
		// A request on a connection accepted just before the listener closed.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		writeFailure(sw, http.StatusServiceUnavailable, "refusing")
	case ModeUnavailable:
		writeFailure(sw, http.StatusServiceUnavailable, "destination unavailable (test mode)")
	case ModeBadRequest:
		writeFailure(sw, http.StatusBadRequest, "bad request (test mode)")
	case ModeTooManyRequests:
		if v := d.retryAfter.Load(); v != nil && *v != "" {
			sw.Header().Set("Retry-After", *v)
		}
		writeFailure(sw, http.StatusTooManyRequests, "too many requests (test mode)")
	case ModeSlow:
		t := time.NewTimer(maxSlow)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-d.release:
		case <-t.C:
		}
		if r.Context().Err() == nil { // released by Close or maxSlow
			writeFailure(sw, http.StatusGatewayTimeout, "too slow (test mode)")
		}
	default:
		switch {
		case strings.HasPrefix(r.URL.Path, "/nexus/"):
			http.StripPrefix("/nexus", d.nexus).ServeHTTP(sw, r)
		case r.URL.Path == "/health":
			sw.WriteHeader(http.StatusOK)
		case r.URL.Path == "/callback" || strings.HasPrefix(r.URL.Path, "/callback/"):
			if r.Method != http.MethodPost {
				writeFailure(sw, http.StatusMethodNotAllowed, "POST only")
			} else if call.State != "" {
				d.comp.ServeHTTP(sw, r)
			} else {
				sw.WriteHeader(http.StatusOK)
			}
		default:
			writeFailure(sw, http.StatusNotFound, "no such path")
		}
		if sw.status == 0 { // net/http answers 200 for a handler that wrote nothing
			sw.status = http.StatusOK
		}
	}
}

func (d *Destination) record(c Call, status int) {
	c.Status = status
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.countOnly {
		d.calls.count(c.Kind)
		return
	}
	d.calls.add(c)
}

// CountOnly makes the destination count the calls it receives from now on
// without keeping them: Count goes on, Calls returns only those kept
// before. For benchmarks of hundreds of thousands of calls: a receiver
// that keeps every call, with its headers and body, grows this process's
// heap by about a kilobyte a call, and the fresh memory each turn of a
// long benchmark then touches (zeroed spans, page faults) lands in
// whichever side's turn the heap happens to grow — 12 % of the load
// process's CPU in one side's turns of BenchmarkProcessPostgresNodesInterleaved,
// a few percent in the others'. A real receiver answers and forgets.
func (d *Destination) CountOnly() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.countOnly = true
}

// callLog is the recorded calls in arrival order, with their counts. A
// benchmark records hundreds of thousands of calls and polls Count every few
// milliseconds while the handlers record: the calls are kept in chunks of
// fixed size, so recording one never copies those before it (one growing
// slice copied the whole log at each doubling, and the pages it touched,
// in whichever turn of a benchmark happened to cross the size), and Count
// reads a counter, not a walk of the log under the handlers' mutex.
type callLog struct {
	chunks [][]Call
	n      int
	byKind map[Kind]int
}

// callChunk is the number of calls per chunk of a callLog.
const callChunk = 4096

func (l *callLog) add(c Call) {
	if len(l.chunks) == 0 || len(l.chunks[len(l.chunks)-1]) == callChunk {
		l.chunks = append(l.chunks, make([]Call, 0, callChunk))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, c)
	l.count(c.Kind)
}

// count counts a call of kind k (kept by add, or not kept at all).
func (l *callLog) count(k Kind) {
	if l.byKind == nil {
		l.byKind = make(map[Kind]int, 4)
	}
	l.n++
	l.byKind[k]++
}

// all returns a copy of every kept call in arrival order.
func (l *callLog) all() []Call {
	kept := 0
	for _, ch := range l.chunks {
		kept += len(ch)
	}
	out := make([]Call, 0, kept)
	for _, ch := range l.chunks {
		out = append(out, ch...)
	}
	return out
}

// describe parses what kind of request r is.
// With keep false it fills only what routing and counting read (Kind,
// State, Service, Operation).
func describe(r *http.Request, body []byte, keep bool) Call {
	c := Call{Kind: KindOther}
	if keep {
		c.RequestID = r.Header.Get("Nexus-Request-Id")
		c.OperationToken = r.Header.Get("Nexus-Operation-Token")
		c.ContentType = r.Header.Get("Content-Type")
		c.Body, c.Header, c.At = body, r.Header.Clone(), time.Now()
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/nexus/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) >= 2 {
			c.Service, c.Operation = parts[0], parts[1]
		}
		switch {
		case len(parts) == 2 && r.Method == http.MethodPost:
			c.Kind = KindStart
		case len(parts) == 3 && parts[2] == "cancel":
			c.Kind = KindCancel
		}
	} else if r.URL.Path == "/health" {
		c.Kind = KindHealth
	} else if strings.HasPrefix(r.URL.Path, "/callback") {
		c.Kind = KindCallback
		c.State = r.Header.Get("Nexus-Operation-State")
	}
	return c
}

func writeFailure(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "{\"message\":%q}", msg)
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
