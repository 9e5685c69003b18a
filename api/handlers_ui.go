package api

import "net/http"

// StatusPage is the status page (package ui) as the API mounts it: two
// handlers, so that its data can never be reached through the public
// route. Both answer GET and HEAD themselves, 405 to anything else, and
// set their own Content-Security-Policy.
type StatusPage interface {
	// Page serves the static files under /ui/ and redirects /ui; it holds
	// no data, whatever the request's decoded path.
	Page() http.Handler
	// Data serves /ui/api/transitions and /ui/api/history (which may ask
	// every peer with this node's token).
	Data() http.Handler
}

// mountUI serves the status page at /ui/ and /ui (which redirects). The
// page's static files hold no data and are public, so a browser can load
// the page and then ask for a token; its data calls (the API's GETs and
// /ui/api/) need the read role. Only the data handler is mounted at
// /ui/api/: a path such as /ui/api%2Ftransitions, which the mux routes to
// the public /ui/ (%2F stays inside one segment) but which decodes to a
// data path, reaches the page handler and is a 404. Call it from
// registerRoutes when Deps.UI is set.
func (s *Server) mountUI(p StatusPage) {
	s.handleHTTP("/ui/api/", needRead, p.Data())
	page := p.Page()
	s.handleHTTP("/ui/", needNothing, page)
	s.handleHTTP("/ui", needNothing, page)
}
