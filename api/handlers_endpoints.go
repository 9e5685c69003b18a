package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"fusebox/raftstore/state"
	"fusebox/transport"
)

func (s *Server) endpointRoutes() {
	s.handle("GET /v1/endpoints", needRead, s.endpointList)
	s.handle("GET /v1/endpoints/{name}", needRead, s.endpointGet)
	s.handle("PUT /v1/endpoints/{name}", needAdmin, s.endpointPut)
	s.handle("DELETE /v1/endpoints/{name}", needAdmin, s.endpointDelete)
}

// toEndpoint renders an endpoint; its URL's credentials and query are
// redacted (one stored before credentials were refused must not show them).
// The health check's URL is redacted the same way.
func toEndpoint(e state.Endpoint) Endpoint {
	out := Endpoint{Name: e.Name, URL: transport.RedactURL(e.URL), Description: e.Description, Index: e.Index, UpdatedAt: e.UpdatedAt, Author: e.Author}
	if h := e.Health; h != nil {
		out.Health = &EndpointHealth{URL: transport.RedactURL(h.URL), Interval: h.Interval, Timeout: h.Timeout, HealthyStatus: h.HealthyStatus}
	}
	return out
}

func (s *Server) endpointList(w http.ResponseWriter, r *http.Request) error {
	out := []Endpoint{}
	for _, e := range s.deps.State.Endpoints() {
		out = append(out, toEndpoint(e))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) endpointGet(w http.ResponseWriter, r *http.Request) error {
	e, ok := s.deps.State.Endpoint(r.PathValue("name"))
	if !ok {
		return Errorf(http.StatusNotFound, CodeNotFound, "no endpoint named %q", r.PathValue("name"))
	}
	writeJSON(w, http.StatusOK, toEndpoint(e))
	return nil
}

func (s *Server) endpointPut(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var in Endpoint
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	if in.Name != "" && in.Name != name {
		return BadField("name", "body names endpoint %q but the path names %q", in.Name, name)
	}
	if err := s.checkEndpointURL(r.Context(), "url", in.URL); err != nil {
		return err
	}
	var health *state.EndpointHealth
	if h := in.Health; h != nil {
		if err := s.checkEndpointURL(r.Context(), "health.url", h.URL); err != nil {
			return err
		}
		health = &state.EndpointHealth{URL: h.URL, Interval: h.Interval, Timeout: h.Timeout, HealthyStatus: h.HealthyStatus}
	}
	e, err := s.deps.Store.PutEndpoint(r.Context(), state.PutEndpointCommand{
		CommandMeta: s.meta(r), Name: name, URL: in.URL, Description: in.Description, Health: health,
	})
	if err != nil {
		return err
	}
	s.waitApplied(r.Context(), e.Index)
	writeJSON(w, http.StatusOK, WriteResult{Index: e.Index})
	return nil
}

func (s *Server) endpointDelete(w http.ResponseWriter, r *http.Request) error {
	idx, err := s.deps.Store.DeleteEndpoint(r.Context(), state.DeleteEndpointCommand{CommandMeta: s.meta(r), Name: r.PathValue("name")})
	if err != nil {
		return err
	}
	s.waitApplied(r.Context(), idx)
	writeJSON(w, http.StatusOK, WriteResult{Index: idx})
	return nil
}

// checkEndpointURL refuses, with a 400 naming field, an endpoint URL that
// carries credentials (send them as headers: a URL is shown and logged) or
// that the destination policy refuses (a member's address; the global
// allowlist when one is set). raftstore checks the rest (scheme, host,
// length). The health check's URL (field health.url) passes the same check.
func (s *Server) checkEndpointURL(ctx context.Context, field, raw string) error {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return BadField(field, "must not carry credentials (user:password@); send them as request headers")
	}
	if s.deps.Tasks == nil {
		return nil
	}
	if err := s.deps.Tasks.CheckEndpointURL(ctx, raw); err != nil {
		var de *transport.DestinationError
		if errors.As(err, &de) {
			return BadField(field, "%s", de.Reason)
		}
		return err
	}
	return nil
}
