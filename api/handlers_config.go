package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// readYourWritesWait bounds how long a write's answer waits for the local
// node to apply it, so a GET to the same node right after sees the write.
const readYourWritesWait = 5 * time.Second

func (s *Server) configRoutes() {
	s.handle("GET /v1/config", needRead, s.configList)
	s.handle("GET /v1/config/_history", needRead, s.configHistory)
	s.handle("GET /v1/config/{key}", needRead, s.configGet)
	s.handle("PUT /v1/config/{key}", needAdmin, s.configPut)
	s.handle("DELETE /v1/config/{key}", needAdmin, s.configDelete)
	if imp, ok := s.deps.Store.(configImporter); ok {
		s.handle("POST /v1/config:import", needAdmin, func(w http.ResponseWriter, r *http.Request) error {
			return s.configImport(w, r, imp)
		})
	}
}

// configDestination is what a destination constraint is stored as: a
// callback URL constrains its breaker key, scheme://host[:port] (the path
// and query select nothing, and may carry a secret); an endpoint name is
// kept as given.
func configDestination(d string) string {
	if strings.Contains(d, "://") {
		return transport.BreakerDestination(breakerpool.TaskGroupCallback, d)
	}
	return d
}

// toConfigEntry renders a stored entry; a constraint written as a full URL
// before they were reduced to their host is shown redacted.
func toConfigEntry(e state.ConfigEntry) ConfigEntry {
	return ConfigEntry{Key: e.Key, Namespace: e.Namespace, Destination: transport.RedactURL(e.Destination), Value: e.Value,
		Index: e.Index, UpdatedAt: e.UpdatedAt, Author: e.Author}
}

func (s *Server) configList(w http.ResponseWriter, r *http.Request) error {
	out := ConfigList{Entries: []ConfigEntry{}, Keys: []ConfigKey{}}
	for _, e := range s.deps.State.Config() {
		out.Entries = append(out.Entries, toConfigEntry(e))
	}
	for _, k := range dynconfig.Keys() {
		ck := ConfigKey{Key: k.Name, Type: k.Type, Default: k.Default, Description: k.Description}
		for _, c := range k.Constraints {
			ck.Constraints = append(ck.Constraints, c.String())
		}
		out.Keys = append(out.Keys, ck)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) configGet(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if !dynconfig.IsKey(key) {
		return Errorf(http.StatusNotFound, CodeNotFound, "unknown config key %q (GET /v1/config lists the keys)", key)
	}
	out := []ConfigEntry{}
	for _, e := range s.deps.State.Config() {
		if e.Key == key {
			out = append(out, toConfigEntry(e))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) configPut(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	var in ConfigWrite
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	if len(in.Value) == 0 {
		return BadField("value", "missing \"value\": the new JSON value of %s", key)
	}
	// Validate and canonicalise before proposing so a bad value costs no
	// Raft round trip and the log holds the canonical value ("10" → "10s");
	// the FSM validates again, deterministically, so nothing invalid is
	// written even by a client that bypasses this check.
	in.Destination = configDestination(in.Destination)
	canon, err := dynconfig.Canonical(dynconfig.Entry{Key: key, Namespace: in.Namespace, Destination: in.Destination, Value: in.Value})
	if err != nil {
		return err
	}
	e, err := s.deps.Store.SetConfig(r.Context(), state.SetConfigCommand{
		CommandMeta: s.meta(r), Key: key, Namespace: in.Namespace, Destination: in.Destination, Value: canon,
	})
	if err != nil {
		return err
	}
	s.waitApplied(r.Context(), e.Index)
	writeJSON(w, http.StatusOK, WriteResult{Index: e.Index})
	return nil
}

func (s *Server) configDelete(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if !dynconfig.IsKey(key) {
		return Errorf(http.StatusNotFound, CodeNotFound, "unknown config key %q (GET /v1/config lists the keys)", key)
	}
	q := r.URL.Query()
	ns, dest := q.Get("namespace"), q.Get("destination")
	// A URL names its host's entry, unless an entry written with that full
	// URL (before constraints were reduced to the host) is still stored.
	if d := configDestination(dest); d != dest && !s.hasConfigEntry(key, ns, dest) {
		dest = d
	}
	idx, err := s.deps.Store.DeleteConfig(r.Context(), state.DeleteConfigCommand{
		CommandMeta: s.meta(r), Key: key, Namespace: ns, Destination: dest,
	})
	if err != nil {
		return err
	}
	s.waitApplied(r.Context(), idx)
	writeJSON(w, http.StatusOK, WriteResult{Index: idx})
	return nil
}

func (s *Server) hasConfigEntry(key, namespace, destination string) bool {
	for _, e := range s.deps.State.Config() {
		if e.Key == key && e.Namespace == namespace && e.Destination == destination {
			return true
		}
	}
	return false
}

func (s *Server) configHistory(w http.ResponseWriter, r *http.Request) error {
	limit, err := intParam(r, "limit", 100, 1, 10000)
	if err != nil {
		return err
	}
	out := []ConfigChange{}
	for _, h := range s.deps.State.ConfigHistory(limit) {
		out = append(out, ConfigChange{Index: h.Index, At: h.At, Author: h.Author, Op: h.Op, Key: h.Key,
			Namespace: h.Namespace, Destination: transport.RedactURL(h.Destination), Value: historyValue(h)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// historyValue is a history row's value as shown. A forced breaker's row
// (state.ForceBreakerHistoryKey) holds the forced row as JSON, and its
// destination is redacted as the row's own is: an older build keyed a
// callback's forced breaker by its full URL, query included, and clearing
// such a row (clearLegacyForced) must name that URL, so the FSM writes it
// into the history again. The other fields are kept as stored. A value
// that does not decode is not shown: shown raw it could carry the secret.
func historyValue(h state.HistoryEntry) json.RawMessage {
	if h.Key != state.ForceBreakerHistoryKey || len(h.Value) == 0 {
		return h.Value
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(h.Value, &v); err != nil {
		return nil
	}
	for k, raw := range v {
		if !strings.EqualFold(k, "destination") { // the FSM writes "destination"
			continue
		}
		var d string
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil
		}
		v[k], _ = json.Marshal(transport.RedactURL(d))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// waitApplied gives read-your-writes on this node: the answer to a write
// leaves only once the local FSM has applied it (bounded).
func (s *Server) waitApplied(ctx context.Context, index uint64) {
	ctx, cancel := context.WithTimeout(ctx, readYourWritesWait)
	defer cancel()
	if err := s.deps.Store.WaitForApplied(ctx, index); err != nil {
		s.log.Warn("write committed but not yet applied locally", "index", index, "err", err)
	}
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, BadField(name, "query parameter %s=%q: want an integer in [%d, %d]", name, v, lo, hi)
	}
	return n, nil
}
