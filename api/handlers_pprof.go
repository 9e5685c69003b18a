package api

import (
	"net/http"
	"net/http/pprof"
	"os"
	"strings"

	"fusebox/transport"
)

// registerPprof serves Go's runtime profiles under /debug/pprof/ when
// Config.EnablePprof is set (off by default: a CPU profile or a trace costs
// the node CPU while it runs, and the profiles show its internals). With
// tokens configured, every profile needs the admin role, reads included.
func (s *Server) registerPprof() {
	s.handleHTTP("GET /debug/pprof/", needAdmin, http.HandlerFunc(pprof.Index)) // heap, goroutine, allocs, block, mutex, …
	s.handleHTTP("GET /debug/pprof/cmdline", needAdmin, http.HandlerFunc(cmdline))
	s.handleHTTP("GET /debug/pprof/profile", needAdmin, http.HandlerFunc(pprof.Profile))
	s.handleHTTP("GET /debug/pprof/symbol", needAdmin, http.HandlerFunc(pprof.Symbol))
	s.handleHTTP("POST /debug/pprof/symbol", needAdmin, http.HandlerFunc(pprof.Symbol))
	s.handleHTTP("GET /debug/pprof/trace", needAdmin, http.HandlerFunc(pprof.Trace))
}

// cmdline is pprof.Cmdline with URLs redacted: the command line can carry
// --postgres-url with its password, and an admin token is no reason to
// show it.
func cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(strings.Join(redactArgs(os.Args), "\x00")))
}

// redactArgs returns args with every URL (an argument, or a flag's value
// after "=") through transport.RedactURL: credentials, query and fragment
// hidden.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		name, val, ok := strings.Cut(a, "=")
		switch {
		case ok && strings.HasPrefix(name, "-") && strings.Contains(val, "://"):
			a = name + "=" + transport.RedactURL(val)
		case strings.Contains(a, "://"):
			a = transport.RedactURL(a)
		}
		out[i] = a
	}
	return out
}
