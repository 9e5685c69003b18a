package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"fusebox/internal/authtoken"
)

// Access is what a route demands of its caller; every route declares one
// where it is registered (Server.handle, Server.handleHTTP).
type Access struct {
	// Public routes need no token (the health probes, the status page's
	// static files, the 404/405 fallback).
	Public bool
	// Roles are the token roles the route accepts (admin always).
	Roles authtoken.Roles
}

// The access levels of the API's routes (docs/api.md lists them per route).
var (
	needNothing  = Access{Public: true}
	needRead     = Access{Roles: authtoken.Of(authtoken.RoleRead, authtoken.RoleNode)}
	needTaskRead = Access{Roles: authtoken.Of(authtoken.RoleSubmit, authtoken.RoleRead, authtoken.RoleNode)}
	needSubmit   = Access{Roles: authtoken.Of(authtoken.RoleSubmit)}
	needNode     = Access{Roles: authtoken.Of(authtoken.RoleNode)}
	needAdmin    = Access{Roles: authtoken.Of()}
)

// Allows reports whether a token of role r may call a route with this
// access (a public route allows everyone).
func (a Access) Allows(r authtoken.Role) bool { return a.Public || a.Roles.Has(r) }

// Route is one registered route and its access: the table every request
// is authorised from (Server.Routes lists it).
type Route struct {
	Pattern string
	Access  Access
}

// callerKey carries the authenticated caller in a request's context.
type callerKey struct{}

// AnonymousAuthor is the author recorded for writes when no tokens are
// configured.
const AnonymousAuthor = "anonymous"

// CallerName is the name of the token that authenticated the request, or
// AnonymousAuthor when the node has no tokens. It is what the config
// history and every other author field record; a client cannot choose it.
func CallerName(ctx context.Context) string {
	if n, ok := ctx.Value(callerKey{}).(string); ok {
		return n
	}
	return AnonymousAuthor
}

// tokens is the set in force for this request (nil: authorisation off).
func (s *Server) tokens() *authtoken.Set {
	if s.cfg.Tokens != nil {
		return s.cfg.Tokens.Set()
	}
	return s.single
}

// authorize authenticates the bearer token and checks its role against
// the route's access before anything of the body is read: 401 with
// WWW-Authenticate without a token or with an unknown one, 403 naming the
// roles needed for a known token of another role. On success the token's
// name goes into the request's context (CallerName).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, pattern string, a Access) (*http.Request, bool) {
	set := s.tokens()
	if set.Len() == 0 {
		return r, true
	}
	if a.Public {
		return r, true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var t authtoken.Token
	if ok {
		t, ok = set.Lookup(strings.TrimSpace(tok))
	}
	if !ok {
		s.metrics.authDenied.WithLabelValues("unauthenticated").Inc()
		dropBody(w, r)
		w.Header().Set("WWW-Authenticate", `Bearer realm="fusebox"`)
		writeError(w, Errorf(http.StatusUnauthorized, CodeUnauthenticated,
			"%s needs Authorization: Bearer <token> with role %s; none or an unknown token was given", pattern, a.Roles))
		return r, false
	}
	if !a.Roles.Has(t.Role) {
		s.metrics.authDenied.WithLabelValues("forbidden").Inc()
		dropBody(w, r)
		writeError(w, Errorf(http.StatusForbidden, CodePermission,
			"%s needs a token with role %s; token %q has role %s", pattern, a.Roles, t.Name, t.Role))
		return r, false
	}
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, t.Name)), true
}

// routes registers every route through the table: nothing is served that
// did not declare its access.
func (s *Server) routes() {
	s.handleHTTP("GET /healthz", needNothing, http.HandlerFunc(s.healthz))
	s.handleHTTP("GET /readyz", needNothing, http.HandlerFunc(s.readyz))
	var g prometheus.Gatherer = prometheus.NewRegistry()
	if s.deps.Gatherer != nil {
		g = s.deps.Gatherer
	}
	metrics := needRead
	if s.cfg.MetricsPublic {
		metrics = needNothing
	}
	s.handleHTTP("GET /metrics", metrics, promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	s.registerRoutes()
	s.registerDebug() // handlers_debug.go
	if s.cfg.EnablePprof {
		s.registerPprof()
	}
	s.handleHTTP("/", needNothing, http.HandlerFunc(s.fallback))
}

// Routes lists the route table: every pattern served and its access.
func (s *Server) Routes() []Route { return append([]Route(nil), s.table...) }

// handle registers an API route whose handler returns an error, written in
// the API's error format.
func (s *Server) handle(pattern string, a Access, h func(w http.ResponseWriter, r *http.Request) error) {
	s.handleHTTP(pattern, a, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	}))
}

// handleHTTP registers any handler through the table. In order, before h
// runs: a body gets its read deadline (so a refused request's unread body,
// which net/http drains after the answer, is bounded too); a connection
// over --max-conns is refused unless the route is a health probe; the
// token is authorised against a — all before any of the body is read.
func (s *Server) handleHTTP(pattern string, a Access, h http.Handler) {
	s.table = append(s.table, Route{Pattern: pattern, Access: a})
	health := pattern == "GET /healthz" || pattern == "GET /readyz"
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.limit(w, r, health) {
			return
		}
		r, ok := s.authorize(w, r, pattern, a)
		if !ok {
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// fallback answers what no route matched: 405 with Allow when the path
// exists for other methods (found by asking the mux), else 404.
func (s *Server) fallback(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pat := s.mux.Handler(probe); pat != "" && pat != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, Errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s %s: method not allowed; allowed: %s",
			r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, Errorf(http.StatusNotFound, CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
}
