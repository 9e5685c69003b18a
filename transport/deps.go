package transport

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Deps are what the API serves. Interfaces are declared here, by their
// consumer, and kept small; nil dependencies leave their routes out.
type Deps struct {
	// Gatherer serves /metrics (the node's own registry).
	Gatherer prometheus.Gatherer
	// Ready reports readiness for /readyz with a detail map.
	Ready func() (ready bool, detail map[string]any)
}

func (s *Server) registerRoutes() {}

// mapError turns any error a handler returns into the API's error.
func (s *Server) mapError(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	s.log.Error("unexpected API error", "err", err)
	return Errorf(500, CodeInternal, "%v", err)
}
