package api

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits harden the server against slow and numerous clients. Zero fields
// take the defaults below.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the moment the
	// route is authorised (http.ResponseController.SetReadDeadline); a
	// body not in by then gets 408 and the connection is closed.
	BodyTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
	// MaxConns caps the connections served normally. Connections over it
	// go to a small reserve (HealthReserve) that answers only /healthz and
	// /readyz, with Connection: close, each closed ReserveDeadline after it
	// was accepted; any other route there gets 503 with Retry-After. Past
	// the reserve a new connection is closed at once.
	MaxConns int
	// HealthReserve is the number of connections over MaxConns kept for
	// the health probes.
	HealthReserve int
	// ReserveDeadline is the whole life of a reserve connection.
	ReserveDeadline time.Duration
}

// Defaults of Limits (and of the serve flags that set them).
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultBodyTimeout       = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 1024
	DefaultHealthReserve     = 32
	DefaultReserveDeadline   = 2 * time.Second
)

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.BodyTimeout, DefaultBodyTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.ReserveDeadline, DefaultReserveDeadline)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.HealthReserve <= 0 {
		l.HealthReserve = DefaultHealthReserve
	}
	return l
}

// connGate counts connections against MaxConns and the health reserve. It
// works through http.Server's ConnContext (called in the accept loop, once
// per connection, before anything is read) and ConnState hooks rather than
// by wrapping the listener, so the connections the server sees are the
// listener's own — a *tls.Conn stays one when the node serves HTTPS.
type connGate struct {
	lim             Limits
	m               *serverMetrics
	normal, reserve atomic.Int64
	conns           sync.Map // net.Conn → *gated
}

// gated is a counted connection; a reserve one has a timer that closes it
// at ReserveDeadline whatever deadlines the server sets on it.
type gated struct {
	reserve bool
	kill    *time.Timer
}

// overCapKey marks the context of requests on a reserve connection.
type overCapKey struct{}

// connContext admits a new connection: a normal slot, else a reserve slot
// (marked in its context, closed at ReserveDeadline), else it is closed
// at once.
func (g *connGate) connContext(ctx context.Context, c net.Conn) context.Context {
	if g.normal.Add(1) <= int64(g.lim.MaxConns) {
		g.m.conns.Inc()
		g.conns.Store(c, &gated{})
		return ctx
	}
	g.normal.Add(-1)
	if g.reserve.Add(1) <= int64(g.lim.HealthReserve) {
		g.m.connsOverCap.WithLabelValues("reserve").Inc()
		g.conns.Store(c, &gated{reserve: true, kill: time.AfterFunc(g.lim.ReserveDeadline, func() { _ = c.Close() })})
		return context.WithValue(ctx, overCapKey{}, true)
	}
	g.reserve.Add(-1)
	g.m.connsOverCap.WithLabelValues("closed").Inc()
	_ = c.Close() // the server's first read fails and it drops the connection
	return ctx
}

// connState gives a connection's slot back when the server is done with it.
func (g *connGate) connState(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	v, ok := g.conns.LoadAndDelete(c)
	if !ok {
		return
	}
	if e := v.(*gated); e.reserve {
		e.kill.Stop()
		g.reserve.Add(-1)
	} else {
		g.normal.Add(-1)
		g.m.conns.Dec()
	}
}

func overCap(r *http.Request) bool {
	v, _ := r.Context().Value(overCapKey{}).(bool)
	return v
}

// limit applies the per-request limits before a route runs: a body gets
// its read deadline; on a reserve connection only health routes answer
// (Connection: close) and everything else gets 503.
func (s *Server) limit(w http.ResponseWriter, r *http.Request, health bool) bool {
	if r.ContentLength != 0 { // a body, or one of unknown length
		// net/http lifts this deadline itself once the body is read to its
		// end (its background read of the connection starts with no
		// deadline), so a handler may run longer than BodyTimeout.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.lim.BodyTimeout))
	}
	if overCap(r) {
		w.Header().Set("Connection", "close")
		if !health {
			dropBody(w, r)
			writeError(w, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 1,
				Message: "the node is at its connection limit (--max-conns); only /healthz and /readyz are served over it"})
			return false
		}
	}
	return true
}

// dropBody is for a request refused before its body was read: the answer
// closes the connection, and the body's read deadline moves to now, so
// net/http does not drain a body the client may be sending slowly (it
// would hold the connection, and a --max-conns slot, until BodyTimeout).
func dropBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
