package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
)

// DefaultMaxResponseBytes bounds how much of a response body is read.
const DefaultMaxResponseBytes = 1 << 20

// Options configure an Executor. The zero value is usable.
type Options struct {
	// HTTPClient makes every request. Nil means a client owned by the
	// executor: pooled keep-alive transport (up to 1,000 idle connections
	// per host), no redirects followed. A caller-supplied client is used as
	// is and never closed by the executor.
	HTTPClient *http.Client
	// MaxResponseBytes bounds each response body read; 0 means
	// DefaultMaxResponseBytes. A larger body fails the attempt (not down).
	MaxResponseBytes int64
	// Logger receives one debug record per attempt (never bodies). Nil
	// discards.
	Logger *slog.Logger
	// Registerer receives the executor's metrics. Nil registers none.
	Registerer prometheus.Registerer
	// Policy, when set, guards the executor-owned client's dialer: a
	// connection to a cluster member's address is refused after DNS
	// resolution (Policy.DialControl). Ignored with a caller's HTTPClient.
	Policy *Policy
	// LocalAddr, when set, is the local IP address (a literal such as
	// "10.0.0.5" or "fe80::1%eth0"; no port) the executor-owned client's
	// connections leave from, for hosts with several addresses: the
	// dialer binds it, port 0, before connecting. Empty: the kernel
	// chooses, by its routes. New refuses a value that is not an IP
	// address or that this host cannot bind. An IPv4 address reaches
	// only destinations' IPv4 addresses, an IPv6 one only their IPv6
	// addresses; through a proxy (the environment's) it is the source of
	// the connection to the proxy. Ignored with a caller's HTTPClient.
	LocalAddr string
	// Series, when set, decides which destinations the request series
	// (requests.go) label by name; the others are labelled
	// breakerpool.SeriesOther. Nil labels every destination.
	Series SeriesFilter
}

// Executor performs outbound calls and classifies their outcomes. It is safe
// for concurrent use. It owns no goroutines; Close releases idle connections.
type Executor struct {
	client   *http.Client
	ownsHTTP bool // client is newHTTPClient's: do calls its transport directly
	maxBody  int64
	log      *slog.Logger
	metrics  *metrics
	requests *requestSeries // nil without a Registerer
	closed   atomic.Bool
}

// New builds an Executor.
func New(opts Options) (*Executor, error) {
	if opts.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("outbound: MaxResponseBytes must not be negative, got %d", opts.MaxResponseBytes)
	}
	e := &Executor{
		client:  opts.HTTPClient,
		maxBody: opts.MaxResponseBytes,
		log:     opts.Logger,
	}
	if e.maxBody == 0 {
		e.maxBody = DefaultMaxResponseBytes
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	local, err := localTCPAddr(opts.LocalAddr)
	if err != nil {
		return nil, err
	}
	if e.client == nil {
		e.client = newHTTPClient(opts.Policy, local)
		e.ownsHTTP = true
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	if opts.Registerer != nil {
		e.requests = newRequestSeries(opts.Series)
		if err := opts.Registerer.Register(e.requests); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// NewHTTPClient returns the client an Executor uses by default: a dedicated
// pooled transport (keep-alives, up to maxIdleConnsPerHost idle connections
// per host, HTTP/2 when offered over TLS, proxies from the environment)
// that does not follow redirects — a 3xx is an answer like any other status.
func NewHTTPClient() *http.Client { return newHTTPClient(nil, nil) }

// localTCPAddr is Options.LocalAddr as the dialer's local address: nil for
// "", an error naming the field for a value that is not an IP address or
// not one this host can bind (checked by binding it, port 0, at once: with
// a typo every call would fail to bind, EADDRNOTAVAIL, and nothing would
// be delivered).
func localTCPAddr(s string) (*net.TCPAddr, error) {
	if s == "" {
		return nil, nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return nil, fmt.Errorf("outbound: LocalAddr %q: not an IP address", s)
	}
	a := net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), 0))
	ln, err := net.ListenTCP("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("outbound: LocalAddr %q: not an address this host can send from: %w", s, err)
	}
	_ = ln.Close()
	return a, nil
}

// maxIdleConnsPerHost is how many idle connections the executor's client
// keeps to one host: as many as it keeps in all (MaxIdleConns). A node's
// calls to one host can be many groups' (every namespace's callbacks to
// one Temporal frontend, starts and callbacks to one service), each with
// up to the group limiter's concurrency in flight (100 by default). A
// pool smaller than the calls in flight closes a connection at every
// answer beyond it and dials (for https, handshakes) a new one for the
// next call: with 100, 300 callers to one host dialled about one call in
// five (TestExecutorKeepsConnectionsForEveryCallInFlight).
const maxIdleConnsPerHost = 1000

// maxIdleConns is how many idle connections the client keeps in all. Equal
// to the per-host bound, one host whose calls had a thousand connections
// open at once left a thousand idle, and net/http closed every other
// host's idle connections to keep to it: the next round of 50 calls to an
// innocent host dialled 50 new connections (for https, 50 handshakes)
// instead of none (TestBusyHostKeepsOthersIdleConnections). Idle
// connections exist only after as many calls were in flight, and close
// after IdleConnTimeout.
const maxIdleConns = 8 * maxIdleConnsPerHost

// newHTTPClient is NewHTTPClient whose dialer refuses what policy refuses
// and, when local is not nil, binds local before connecting.
func newHTTPClient(policy *Policy, local *net.TCPAddr) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if local != nil {
		dialer.LocalAddr = local
	}
	if policy != nil {
		dialer.Control = policy.DialControl
	}
	tr := &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Close releases idle connections of an executor-owned client. Execute
// returns ErrClosed afterwards. Close is idempotent.
func (e *Executor) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	if e.ownsHTTP {
		e.client.CloseIdleConnections()
	}
	return nil
}

// Execute performs one attempt of r. The error is:
//   - nil on OutcomeSucceeded and OutcomeStarted;
//   - a *breakerpool.DestinationDownError exactly when the outcome is
//     OutcomeDown (the breaker counts a failure, the task backs off);
//   - a *FailedError on OutcomeFailed (the task ends failed with
//     Result.Message; the breaker sees success);
//   - on OutcomeAborted, ErrClosed or an error wrapping ctx.Err().
func (e *Executor) Execute(ctx context.Context, r Request) (Result, error) {
	if e.closed.Load() {
		return Result{Outcome: OutcomeAborted, Message: ErrClosed.Error()}, ErrClosed
	}
	start := time.Now()
	c := &capture{}
	res, err := e.execute(ctx, &r, c)
	elapsed := time.Since(start)
	e.metrics.observe(r.TaskGroup, res.Outcome, elapsed)
	e.requests.observe(&r, &res, err, c, elapsed)
	if !e.log.Enabled(ctx, slog.LevelDebug) {
		// The attributes below parse the URL and allocate: building them
		// for a discarded record was a fifth of a sync start's client-side
		// allocations.
		return res, err
	}
	e.log.LogAttrs(ctx, slog.LevelDebug, "outbound attempt",
		slog.String("task_group", r.TaskGroup),
		slog.String("destination", BreakerDestination(breakerpool.TaskGroupCallback, r.URL)), // scheme://host only
		slog.String("request_id", r.RequestID),
		slog.Int("status", res.Status),
		slog.String("outcome", res.Outcome.String()),
		slog.Duration("elapsed", time.Since(start)),
		slog.String("message", res.Message))
	return res, err
}

func (e *Executor) execute(ctx context.Context, r *Request, c *capture) (Result, error) {
	if err := r.Validate(); err != nil {
		return Result{Outcome: OutcomeFailed, Message: err.Error()}, &FailedError{Message: err.Error(), Err: err}
	}
	timeout := r.timeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cctx = context.WithValue(cctx, captureKey{}, c)

	var res Result
	var err error
	switch r.TaskGroup {
	case breakerpool.TaskGroupNexusInvocation:
		err = e.startOperation(cctx, r, &res)
	case breakerpool.TaskGroupNexusCancelation:
		err = e.cancelOperation(cctx, r, c)
		if err == nil {
			res.Outcome = OutcomeSucceeded
		}
	default: // breakerpool.TaskGroupCallback, checked by Validate
		err = e.callback(cctx, r, c)
		if err == nil {
			res.Outcome = OutcomeSucceeded
		}
	}
	res.Status = c.status
	if err == nil {
		return res, nil
	}
	return classify(ctx, r.TaskGroup, timeout, c, err)
}

// captureKey carries a *capture through the sdk to the HTTP caller.
type captureKey struct{}

// capture records what the destination answered, whatever the sdk makes of it.
type capture struct {
	status    int
	header    http.Header
	snippet   []byte // first bytes of a non-2xx body, for Message
	tooLarge  bool
	bodyErr   error       // first error reading the body other than EOF
	sent      bool        // the request reached the HTTP client
	responded bool        // the destination sent a status line
	body      limitedBody // the response's body, as read by the caller (do)
}

// do is the sdk's HTTPCaller and the callbacks' transport: it records the
// status and header in the request's capture and bounds the response body.
func (e *Executor) do(req *http.Request) (*http.Response, error) {
	// The sdk streams bodies through its own Reader, which net/http cannot
	// size, so it would send them chunked; it does set Content-Length from
	// the serialized content, which is exact.
	if req.Body != nil && req.ContentLength == 0 {
		if n, err := strconv.ParseInt(req.Header.Get("Content-Length"), 10, 64); err == nil && n > 0 {
			req.ContentLength = n
		}
	}
	if err := bufferBody(req); err != nil {
		return nil, err
	}
	c, _ := req.Context().Value(captureKey{}).(*capture)
	if c == nil {
		c = &capture{}
	}
	c.sent = true
	var resp *http.Response
	var err error
	if e.ownsHTTP && req.URL.User == nil {
		// What Client.Do would do with the executor's own client: no
		// redirect to follow (CheckRedirect keeps the 3xx), no jar, no
		// timeout but the context's. Do added only its redirect
		// bookkeeping, a copy of every request's header among it. A URL
		// with credentials (Validate refuses them) would need Do's basic
		// auth; a caller's client goes through Do as it is.
		resp, err = e.client.Transport.RoundTrip(req)
	} else {
		resp, err = e.client.Do(req)
	}
	if err != nil {
		return nil, err
	}
	c.responded = true
	c.status = resp.StatusCode
	c.header = resp.Header
	c.body = limitedBody{
		rc:        resp.Body,
		remaining: e.maxBody,
		c:         c,
		keep:      resp.StatusCode/100 != 2,
		over:      resp.ContentLength > e.maxBody,
	}
	resp.Body = &c.body
	return resp, nil
}

var errAborted = errors.New("outbound call aborted by caller")

// bufferBody reads a request body that net/http cannot see is in memory
// (the sdk's own reader) into one, when its length is known and within
// MaxRequestBodyBytes. net/http sends the headers of such a body ahead of
// it, in a TCP write of their own ("the server may need the headers
// early"), and the destination then wakes and reads twice: that second
// write and read were most of what a Nexus start cost beyond a bare POST
// of the same bytes (docs/architecture.md, "Nexus sync start"). The bodies
// here are already in memory (a task's input), so the copy is small.
// Bodies net/http knows (http.NewRequest with a bytes.Reader sets GetBody)
// are left alone.
func bufferBody(req *http.Request) error {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil ||
		req.ContentLength <= 0 || req.ContentLength > MaxRequestBodyBytes {
		return nil
	}
	buf := make([]byte, req.ContentLength)
	_, err := io.ReadFull(req.Body, buf)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(buf))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return nil
}
