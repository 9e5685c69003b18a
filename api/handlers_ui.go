package api

import "net/http"

// mountUI serves the status page (package ui) at /ui/ and /ui (which
// redirects). The handler answers GET and HEAD itself, 405 to anything
// else, and sets its own Content-Security-Policy. The page's static files
// hold no data and are public, so a browser can load the page and then ask
// for a token; its data calls (the API's GETs and /ui/api/) need the read
// role. Call it from registerRoutes when Deps.UI is set.
func (s *Server) mountUI(h http.Handler) {
	s.handleHTTP("/ui/api/", needRead, h)
	s.handleHTTP("/ui/", needNothing, h)
	s.handleHTTP("/ui", needNothing, h)
}
