package transport

import (
	"net/http"

	"fusebox/raftstore"
)

func (s *Server) endpointRoutes() {
	s.handle("GET /v1/endpoints", needRead, s.endpointList)
	s.handle("GET /v1/endpoints/{name}", needRead, s.endpointGet)
	s.handle("PUT /v1/endpoints/{name}", needAdmin, s.endpointPut)
	s.handle("DELETE /v1/endpoints/{name}", needAdmin, s.endpointDelete)
}

func toEndpoint(e raftstore.Endpoint) Endpoint {
	return Endpoint{Name: e.Name, URL: e.URL, Description: e.Description, Index: e.Index, UpdatedAt: e.UpdatedAt, Author: e.Author}
}

func (s *Server) endpointList(w http.ResponseWriter, r *http.Request) error {
	out := []Endpoint{}
	for _, e := range s.deps.Store.Endpoints() {
		out = append(out, toEndpoint(e))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) endpointGet(w http.ResponseWriter, r *http.Request) error {
	e, ok := s.deps.Store.Endpoint(r.PathValue("name"))
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
	e, err := s.deps.Store.PutEndpoint(r.Context(), raftstore.PutEndpointCommand{
		CommandMeta: s.meta(r), Name: name, URL: in.URL, Description: in.Description,
	})
	if err != nil {
		return err
	}
	s.waitApplied(r.Context(), e.Index)
	writeJSON(w, http.StatusOK, WriteResult{Index: e.Index})
	return nil
}

func (s *Server) endpointDelete(w http.ResponseWriter, r *http.Request) error {
	idx, err := s.deps.Store.DeleteEndpoint(r.Context(), raftstore.DeleteEndpointCommand{CommandMeta: s.meta(r), Name: r.PathValue("name")})
	if err != nil {
		return err
	}
	s.waitApplied(r.Context(), idx)
	writeJSON(w, http.StatusOK, WriteResult{Index: idx})
	return nil
}
