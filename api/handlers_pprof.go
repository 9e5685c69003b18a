package api

import (
	"net/http"
	"net/http/pprof"
)

// registerPprof serves Go's runtime profiles under /debug/pprof/ when
// Config.EnablePprof is set (off by default: a CPU profile or a trace costs
// the node CPU while it runs, and the profiles show its internals). With
// tokens configured, every profile needs the admin role, reads included.
func (s *Server) registerPprof() {
	s.handleHTTP("GET /debug/pprof/", needAdmin, http.HandlerFunc(pprof.Index)) // heap, goroutine, allocs, block, mutex, …
	s.handleHTTP("GET /debug/pprof/cmdline", needAdmin, http.HandlerFunc(pprof.Cmdline))
	s.handleHTTP("GET /debug/pprof/profile", needAdmin, http.HandlerFunc(pprof.Profile))
	s.handleHTTP("GET /debug/pprof/symbol", needAdmin, http.HandlerFunc(pprof.Symbol))
	s.handleHTTP("POST /debug/pprof/symbol", needAdmin, http.HandlerFunc(pprof.Symbol))
	s.handleHTTP("GET /debug/pprof/trace", needAdmin, http.HandlerFunc(pprof.Trace))
}
