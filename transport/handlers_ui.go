package transport

import "net/http"

// mountUI serves the status page (package ui) at /ui/ and /ui (which
// redirects). The handler answers GET and HEAD itself, 405 to anything
// else, and sets its own Content-Security-Policy; it changes nothing, so no
// admin token is asked for. Call it from registerRoutes when Deps.UI is set.
func (s *Server) mountUI(h http.Handler) {
	s.mux.Handle("/ui/", h)
	s.mux.Handle("/ui", h)
}
