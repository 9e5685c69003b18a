package transport

import (
	"net/http"
	"net/http/pprof"
)

// registerPprof serves Go's runtime profiles under /debug/pprof/ when
// Config.EnablePprof is set (off by default: a CPU profile or a trace costs
// the node CPU while it runs, and the profiles show its internals). With an
// admin token configured, every profile needs it, reads included.
func (s *Server) registerPprof() {
	guard := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if s.authorized(w, r) {
				h(w, r)
			}
		}
	}
	s.mux.HandleFunc("GET /debug/pprof/", guard(pprof.Index)) // heap, goroutine, allocs, block, mutex, …
	s.mux.HandleFunc("GET /debug/pprof/cmdline", guard(pprof.Cmdline))
	s.mux.HandleFunc("GET /debug/pprof/profile", guard(pprof.Profile))
	s.mux.HandleFunc("GET /debug/pprof/symbol", guard(pprof.Symbol))
	s.mux.HandleFunc("POST /debug/pprof/symbol", guard(pprof.Symbol))
	s.mux.HandleFunc("GET /debug/pprof/trace", guard(pprof.Trace))
}
