// Package transport is a fusebox node's network surface: the HTTP/JSON admin
// and ingest API (server.go, handlers_*.go) and its Go client (client*.go),
// used by the CLI, by leader forwarding and by the end-to-end tests.
package transport

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMaxBodyBytes bounds every request body the API reads.
const DefaultMaxBodyBytes = 1 << 20

// Config configures the HTTP server.
type Config struct {
	// Addr is host:port to listen on; port 0 picks a free port (see Addr()).
	Addr string
	// AdminToken, when non-empty, is required as "Authorization: Bearer
	// <token>" on every mutating call.
	AdminToken string
	// MaxBodyBytes bounds request bodies (default 1 MiB).
	MaxBodyBytes int64
	// EnablePprof serves Go's profiles under /debug/pprof/ (behind
	// AdminToken when one is set).
	EnablePprof bool
}

// Server serves the API. Build with New, then Start; Close shuts down
// gracefully.
type Server struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	mux    *http.ServeMux
	srv    *http.Server
	ln     net.Listener
	done   chan struct{}
	closed sync.Once
}

// New builds a server; routes are registered for the dependencies given.
func New(cfg Config, deps Deps, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	s := &Server{cfg: cfg, deps: deps, log: logger, mux: http.NewServeMux(), done: make(chan struct{})}
	s.routes()
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	return s
}

// Handler exposes the routes, for tests that use httptest.
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
// port before the rest of it starts), in the background.
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

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	var g prometheus.Gatherer = prometheus.NewRegistry()
	if s.deps.Gatherer != nil {
		g = s.deps.Gatherer
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	s.registerRoutes()
	if s.cfg.EnablePprof {
		s.registerPprof()
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, Errorf(http.StatusNotFound, CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
}

// handle registers an API route. Mutating methods go through the admin
// token check; every handler returns an error that is written in the API's
// error format.
func (s *Server) handle(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
	mutating := !strings.HasPrefix(pattern, "GET ")
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if mutating && !s.authorized(w, r) {
			return
		}
		if e := checkRequestText(r); e != nil {
			writeError(w, e)
			return
		}
		if r.URL.Query().Has("pretty") {
			w = prettyWriter{w}
		}
		if err := h(w, r); err != nil {
			writeError(w, s.mapError(err))
		}
	})
}

// authorized checks the bearer token in constant time: 401 without one,
// 403 with a wrong one.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.AdminToken == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fusebox"`)
		writeError(w, Errorf(http.StatusUnauthorized, CodeUnauthenticated, "this call needs Authorization: Bearer <admin token>"))
		return false
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) != 1 {
		writeError(w, Errorf(http.StatusForbidden, CodePermission, "the admin token is not valid"))
		return false
	}
	return true
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

// prettyWriter marks a response to indent (the request had ?pretty).
type prettyWriter struct{ http.ResponseWriter }

// readJSON decodes a bounded body into v, rejecting unknown fields and
// trailing data; errors name the problem.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var raw bytes.Buffer // for checkJSONText
	dec := json.NewDecoder(io.TeeReader(body, &raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadField("", "request body has data after the JSON value")
	}
	return checkJSONText(raw.Bytes())
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
