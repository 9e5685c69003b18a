// Package api is a fusebox node's network surface: the HTTP/JSON admin
// and ingest API (server.go, handlers_*.go) and its Go client (client*.go),
// used by the CLI, by leader forwarding and by the end-to-end tests.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/authtoken"
	"fusebox/internal/fastjson"
)

// DefaultMaxBodyBytes bounds every request body the API reads.
const DefaultMaxBodyBytes = 1 << 20

// Config configures the HTTP server.
type Config struct {
	// Addr is host:port to listen on; port 0 picks a free port (see Addr()).
	Addr string
	// Tokens is the token set in force, read on every request so a reload
	// applies to the next one. With tokens, every route but the public ones
	// (/healthz, /readyz, the status page's static files) needs
	// "Authorization: Bearer <token>" of a role the route accepts (auth.go).
	Tokens *authtoken.Store
	// AdminToken, used when Tokens is nil, is a single admin token (tests).
	AdminToken string
	// MetricsPublic serves /metrics without a token; otherwise it needs
	// the read role when tokens are configured.
	MetricsPublic bool
	// MaxBodyBytes bounds request bodies (default 1 MiB).
	MaxBodyBytes int64
	// EnablePprof serves Go's profiles under /debug/pprof/ (admin role).
	EnablePprof bool
	// Limits are the timeouts and the connection cap (limits.go).
	Limits Limits
	// Registerer takes the server's metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
}

// Server serves the API. Build with New, then Start; Close shuts down
// gracefully.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	mux     *http.ServeMux
	srv     *http.Server
	ln      net.Listener
	done    chan struct{}
	closed  sync.Once
	single  *authtoken.Set // Config.AdminToken as a set
	lim     Limits
	table   []Route
	metrics *serverMetrics
}

// New builds a server; routes are registered for the dependencies given.
func New(cfg Config, deps Deps, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if deps.Store != nil && deps.State == nil {
		panic("transport: Deps.State (the store's Reader) is required with Deps.Store")
	}
	s := &Server{cfg: cfg, deps: deps, log: logger, mux: http.NewServeMux(), done: make(chan struct{}),
		single: authtoken.Single(cfg.AdminToken), lim: cfg.Limits.withDefaults(), metrics: newServerMetrics(cfg.Registerer, logger)}
	s.routes()
	gate := &connGate{lim: s.lim, m: s.metrics}
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: s.lim.ReadHeaderTimeout,
		IdleTimeout:       s.lim.IdleTimeout,
		MaxHeaderBytes:    s.lim.MaxHeaderBytes,
		ConnContext:       gate.connContext,
		ConnState:         gate.connState,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	return s
}

// Handler exposes the routes, for tests that use httptest (no connection
// cap: that lives in the http.Server's connection hooks).
func (s *Server) Handler() http.Handler { return s.mux }

// Start binds Config.Addr and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("http: listen on %s: %w", s.cfg.Addr, err)
	}
	s.Serve(ln)
	return nil
}

// Serve serves on a listener the caller bound (so the node can learn its
// port before the rest of it starts; a TLS listener serves HTTPS), in the
// background, capped at Limits.MaxConns connections plus the health
// reserve.
func (s *Server) Serve(ln net.Listener) {
	s.ln = ln
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
}

// Addr is the bound address (valid after Start).
func (s *Server) Addr() string {
	if s.ln == nil {
		return s.cfg.Addr
	}
	return s.ln.Addr().String()
}

// Close stops accepting, waits for in-flight requests until ctx ends, then
// closes what is left. Idempotent.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.closed.Do(func() {
		if s.ln == nil {
			return
		}
		err = s.srv.Shutdown(ctx)
		if err != nil {
			_ = s.srv.Close()
		}
		<-s.done
	})
	return err
}

// serverMetrics are the server's own series (docs/metrics.md).
type serverMetrics struct {
	authDenied   *prometheus.CounterVec
	conns        prometheus.Gauge
	connsOverCap *prometheus.CounterVec
	bodyTimeouts prometheus.Counter
}

func newServerMetrics(reg prometheus.Registerer, log *slog.Logger) *serverMetrics {
	m := &serverMetrics{
		authDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_http_auth_denied_total",
			Help: "API requests refused by authorisation: unauthenticated (401: no or unknown token) or forbidden (403: the token's role does not cover the route).",
		}, []string{"reason"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fusebox_http_connections",
			Help: "Open API connections counted against --max-conns (the health reserve excluded).",
		}),
		connsOverCap: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_http_connections_over_cap_total",
			Help: "Connections accepted over --max-conns: reserve (served only /healthz and /readyz) or closed (the reserve was full too).",
		}, []string{"outcome"}),
		bodyTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fusebox_http_body_timeouts_total",
			Help: "Requests whose body did not arrive within --http-body-timeout (answered 408).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.authDenied, m.conns, m.connsOverCap, m.bodyTimeouts} {
			if err := reg.Register(c); err != nil {
				log.Warn("http metrics not registered", "err", err)
			}
		}
	}
	return m
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.deps.Ready == nil {
		writeJSON(w, http.StatusOK, map[string]any{"ready": true})
		return
	}
	ready, detail := s.deps.Ready()
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"ready": ready, "detail": detail})
}

// writeJSON writes v compact, or indented for a request with ?pretty.
// Indenting is a second pass over the output: it was a quarter of a node's
// CPU while a client paged through task listings.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if _, ok := w.(prettyWriter); ok {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
}

// writeJSONFast is writeJSON for the hot answers (a batch submit's, the
// leader's to a forwarded write): internal/fastjson's encoder, the same
// bytes (FuzzMarshal holds them for these types) at about a third of
// encoding/json's CPU. ?pretty goes through writeJSON.
func writeJSONFast(w http.ResponseWriter, status int, v any) {
	if _, ok := w.(prettyWriter); ok {
		writeJSON(w, status, v)
		return
	}
	b, err := fastjson.Marshal(v)
	if err != nil {
		writeJSON(w, status, v) // encoding/json's failure, as before
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // Encoder.Encode's newline
}

// prettyWriter marks a response to indent (the request had ?pretty).
type prettyWriter struct{ http.ResponseWriter }

// Unwrap lets http.ResponseController reach the connection.
func (p prettyWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// readJSON decodes a bounded body into v, rejecting unknown fields and
// trailing data; errors name the problem.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return s.readJSONLimit(w, r, v, s.cfg.MaxBodyBytes, nil)
}

// readJSONLimit is readJSON with its own bound on the body, and prepare,
// when not nil, called with the body before the decode (submitBatch sizes
// the batch's slice from it). The body is read whole first (readBody,
// pre-sized from Content-Length) and decoded from memory: decoding from
// the connection through a tee kept for checkJSONText grew two buffers by
// doubling, the decoder's and the tee's, which was 6 % of the bytes a
// durably delivered task allocated (a submit of 500 tasks is about 175 KB).
//
// Every API body is decoded by encoding/json: it is untrusted input and
// its errors name fields. goccy/go-json decodes a batch about three times
// faster (docs/architecture.md "Issue 17 §3", the fifteenth and
// thirty-fifth sessions), but a parser built on unsafe pointer arithmetic
// is not put on the ingress for 1.5 % of a task's CPU; it serves only JSON
// this system wrote or encoding/json accepted (internal/fastjson).
func (s *Server) readJSONLimit(w http.ResponseWriter, r *http.Request, v any, limit int64, prepare func(body []byte)) error {
	raw, err := s.readBody(w, r, limit)
	if err != nil {
		return err
	}
	if prepare != nil {
		prepare(raw)
	}
	if err := decodeStrict(raw, v); err != nil {
		return err
	}
	return checkJSONText(raw)
}

// decodeStrict decodes raw into v with encoding/json, refusing unknown
// fields and anything after the value, errors as jsonError words them.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadField("", "request body has data after the JSON value")
	}
	return nil
}

// bodyTimeout is the 408 for a body read that hit the read deadline
// (Limits.BodyTimeout), counted; nil for any other error.
func (s *Server) bodyTimeout(err error) *Error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	s.metrics.bodyTimeouts.Inc()
	return Errorf(http.StatusRequestTimeout, CodeInvalidArgument, "request body not received within %v", s.lim.BodyTimeout)
}

// readBodyPresize bounds what readBody allocates on a body's declared
// length alone.
const readBodyPresize = 256 << 10

// readBody reads a request's body whole, bounded by limit, with readJSON's
// answers to a body too large (413) or not received in time (408).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	// Pre-size from Content-Length, but only up to readBodyPresize: a
	// caller must not make the node allocate its whole limit before
	// sending a byte. MinRead more, because ReadFrom wants that much room
	// for the read that finds the end: a buffer exactly the body's size
	// was doubled at its last byte.
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, limit, readBodyPresize)) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		if e := s.bodyTimeout(err); e != nil {
			return nil, e
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, jsonError(err)
		}
		return nil, BadField("", "read request body: %v", err)
	}
	return buf.Bytes(), nil
}

func jsonError(err error) *Error {
	var tooBig *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body exceeds %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return BadField("", "request body is empty; want a JSON object")
	case errors.As(err, &syn):
		return BadField("", "malformed JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		return BadField(typ.Field, "field %q: want %s, got JSON %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for DisallowUnknownFields; its
		// message is the only place the field name appears.
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return BadField(f, "unknown field %q", f)
	default:
		return BadField("", "invalid JSON body: %v", err)
	}
}
