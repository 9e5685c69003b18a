package transport

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
	// /readyz, with Connection: close and a hard ReserveDeadline; any
	// other route there gets 503 with Retry-After. Past the reserve a new
	// connection is closed at once.
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

// capListener counts the connections it hands out against MaxConns and
// the health reserve.
type capListener struct {
	net.Listener
	lim             Limits
	normal, reserve atomic.Int64
	m               *serverMetrics
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.normal.Add(1) <= int64(l.lim.MaxConns) {
			l.m.conns.Inc()
			return &countedConn{Conn: c, release: func() { l.normal.Add(-1); l.m.conns.Dec() }}, nil
		}
		l.normal.Add(-1)
		if l.reserve.Add(1) <= int64(l.lim.HealthReserve) {
			l.m.connsOverCap.WithLabelValues("reserve").Inc()
			hard := time.Now().Add(l.lim.ReserveDeadline)
			_ = c.SetDeadline(hard)
			return &countedConn{Conn: c, hard: hard, release: func() { l.reserve.Add(-1) }}, nil
		}
		l.reserve.Add(-1)
		l.m.connsOverCap.WithLabelValues("closed").Inc()
		_ = c.Close()
	}
}

// countedConn gives its slot back once, on Close. A reserve connection
// (hard set) cannot have its deadlines pushed past hard by the server.
type countedConn struct {
	net.Conn
	hard    time.Time
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func (c *countedConn) clamp(t time.Time) time.Time {
	if c.hard.IsZero() || (!t.IsZero() && t.Before(c.hard)) {
		return t
	}
	return c.hard
}

func (c *countedConn) SetDeadline(t time.Time) error     { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *countedConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *countedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}

// overCapKey marks the context of requests on a reserve connection.
type overCapKey struct{}

func connContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*countedConn); ok && !cc.hard.IsZero() {
		return context.WithValue(ctx, overCapKey{}, true)
	}
	return ctx
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
