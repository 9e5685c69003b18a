package api

import (
	"net/http"
	"strconv"
)

// LogSource is the node's in-memory ring of recent log lines
// (internal/logring): JSON records, oldest first.
type LogSource interface {
	Lines() [][]byte
}

// registerDebug serves the node's recent log lines for the debug bundle,
// admin only: log lines name destinations, nodes and errors.
func (s *Server) registerDebug() {
	s.handle("GET /v1/debug/logs", needAdmin, s.debugLogs)
}

// debugLogs answers the recent lines as JSON Lines (application/x-ndjson);
// ?limit=N keeps the newest N.
func (s *Server) debugLogs(w http.ResponseWriter, r *http.Request) error {
	var lines [][]byte
	if s.deps.Logs != nil {
		lines = s.deps.Logs.Lines()
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return BadField("limit", "limit %q: want a non-negative integer", v)
		}
		if n < len(lines) {
			lines = lines[len(lines)-n:]
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	for _, l := range lines {
		if _, err := w.Write(l); err != nil {
			return nil
		}
	}
	return nil
}
