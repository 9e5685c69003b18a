package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// ShardAdmin is shard ownership as the API serves it (*ownership.Manager).
// Errors are *state.Error, errors wrapping shardmap.ErrNoSuchShard, or
// *shardmap.WrongOwnerError; mapError turns them into API errors.
type ShardAdmin interface {
	// ShardMap is the committed map as this node applied it (nil before the
	// first commit); DrainingNodes the nodes placement skips.
	ShardMap() *shardmap.Map
	DrainingNodes() []state.DrainingNode
	// ShardStats reports a shard's backlog and ack level; ok false means
	// they are not tracked.
	ShardStats(shard int) (backlog int, ackLevel uint64, ok bool)
	Move(ctx context.Context, shard int, node, author string) (shardmap.Assignment, error)
	Unpin(ctx context.Context, shard int, author string) (shardmap.Assignment, error)
	CloseShard(ctx context.Context, shard int, epoch *uint64, author string) (shardmap.Assignment, error)
	SetDraining(ctx context.Context, node string, draining bool, author string) (uint64, error)
}

func (s *Server) shardRoutes() {
	s.handle("GET /v1/shards", needRead, s.shardList)
	s.handle("GET /v1/shards/{id}", needRead, s.shardGet)
	s.handle("POST /v1/shards/{id}/move", needAdmin, s.shardMove)
	s.handle("POST /v1/shards/{id}/unpin", needAdmin, s.shardUnpin)
	s.handle("POST /v1/shards/{id}/close", needAdmin, s.shardClose)
	s.handle("GET /v1/nodes/{id}/shards", needRead, s.nodeShards)
	s.handle("POST /v1/nodes/{id}/drain", needAdmin, s.nodeDrain)
	s.handle("DELETE /v1/nodes/{id}/drain", needAdmin, s.nodeUndrain)
}

// shardState is the committed map and the draining set, or 503 if there is
// no map yet.
func (s *Server) shardState() (*shardmap.Map, map[string]state.DrainingNode, error) {
	m := s.deps.Shards.ShardMap()
	if m == nil {
		e := Errorf(http.StatusServiceUnavailable, CodeUnavailable, "no shard map has been committed yet")
		e.RetryAfter = 1
		return nil, nil, e
	}
	d := map[string]state.DrainingNode{}
	for _, n := range s.deps.Shards.DrainingNodes() {
		d[n.Node] = n
	}
	return m, d, nil
}

func toShard(a shardmap.Assignment, draining map[string]state.DrainingNode) Shard {
	_, dr := draining[a.Owner]
	return Shard{Shard: a.Shard, Owner: a.Owner, Epoch: a.Epoch, Pinned: a.Pinned, OwnerDraining: dr && a.Owner != ""}
}

func (s *Server) shardList(w http.ResponseWriter, r *http.Request) error {
	m, d, err := s.shardState()
	if err != nil {
		return err
	}
	out := ShardList{Version: m.Version, NumShards: m.NumShards, Shards: make([]Shard, 0, len(m.Shards)), Draining: []DrainingNode{}}
	for _, a := range m.Shards {
		out.Shards = append(out.Shards, toShard(a, d))
	}
	for _, n := range s.deps.Shards.DrainingNodes() {
		out.Draining = append(out.Draining, DrainingNode{Node: n.Node, Reason: n.Reason, Since: n.Since})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// shardParam parses {id} as a shard number in the committed map.
func (s *Server) shardParam(r *http.Request) (int, error) {
	v := r.PathValue("id")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, BadField("shard", "shard %q: want a non-negative integer", v)
	}
	return n, nil
}

func (s *Server) shardGet(w http.ResponseWriter, r *http.Request) error {
	id, err := s.shardParam(r)
	if err != nil {
		return err
	}
	m, d, err := s.shardState()
	if err != nil {
		return err
	}
	a, ok := m.Owner(id)
	if !ok {
		return Errorf(http.StatusNotFound, CodeNotFound, "shard %d: no such shard (the cluster has %d shards)", id, m.NumShards)
	}
	out := ShardDetail{Shard: toShard(a, d), Version: m.Version, Tasks: TasksNotTracked}
	if backlog, ack, ok := s.deps.Shards.ShardStats(id); ok {
		out.Tasks, out.Backlog, out.AckLevel = TasksTracked, &backlog, &ack
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) writeAssignment(w http.ResponseWriter, a shardmap.Assignment) {
	d := map[string]state.DrainingNode{}
	for _, n := range s.deps.Shards.DrainingNodes() {
		d[n.Node] = n
	}
	writeJSON(w, http.StatusOK, toShard(a, d))
}

func (s *Server) shardMove(w http.ResponseWriter, r *http.Request) error {
	id, err := s.shardParam(r)
	if err != nil {
		return err
	}
	var in ShardMove
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	if in.Node == "" {
		return BadField("node", "required: the node to move the shard to")
	}
	a, err := s.deps.Shards.Move(r.Context(), id, in.Node, s.meta(r).Author)
	if err != nil {
		return err
	}
	s.writeAssignment(w, a)
	return nil
}

func (s *Server) shardUnpin(w http.ResponseWriter, r *http.Request) error {
	id, err := s.shardParam(r)
	if err != nil {
		return err
	}
	a, err := s.deps.Shards.Unpin(r.Context(), id, s.meta(r).Author)
	if err != nil {
		return err
	}
	s.writeAssignment(w, a)
	return nil
}

func (s *Server) shardClose(w http.ResponseWriter, r *http.Request) error {
	id, err := s.shardParam(r)
	if err != nil {
		return err
	}
	// The unfenced close must be asked for: an empty or null body used to
	// close without the epoch check.
	var in ShardClose
	if r.ContentLength != 0 {
		if err := s.readJSON(w, r, &in); err != nil {
			return err
		}
	}
	switch {
	case in.Epoch != nil && in.Force:
		return BadField("force", `give "epoch" (close only at that epoch) or "force": true (close whatever the epoch), not both`)
	case in.Epoch == nil && !in.Force:
		return BadField("epoch", `required: the epoch the shard must still be at, or "force": true to close it whatever its epoch`)
	}
	a, err := s.deps.Shards.CloseShard(r.Context(), id, in.Epoch, s.meta(r).Author)
	if err != nil {
		return err
	}
	s.writeAssignment(w, a)
	return nil
}

// nodeShardsOf is what node owns in the committed map, and its drain state.
func (s *Server) nodeShardsOf(node string) (NodeShards, error) {
	m, d, err := s.shardState()
	if err != nil {
		return NodeShards{}, err
	}
	out := NodeShards{Node: node, Version: m.Version, Shards: []Shard{}}
	if dn, ok := d[node]; ok {
		out.Draining, out.DrainReason = true, dn.Reason
	}
	for _, i := range m.OwnedBy(node) {
		out.Shards = append(out.Shards, toShard(m.Shards[i], d))
	}
	return out, nil
}

// isMember reports whether gossip knows node (in any state).
func (s *Server) isMember(node string) bool {
	if s.deps.Members == nil {
		return false
	}
	for _, m := range s.deps.Members.Members() {
		if m.ID == node {
			return true
		}
	}
	return false
}

func (s *Server) nodeShards(w http.ResponseWriter, r *http.Request) error {
	node := r.PathValue("id")
	out, err := s.nodeShardsOf(node)
	if err != nil {
		return err
	}
	// A node the cluster does not know — no member, no shard, no drain —
	// is a 404 naming it: answered 200 with no shards, a typo in the id
	// read as an empty node (drain and undrain refuse such an id).
	if len(out.Shards) == 0 && !out.Draining && !s.isMember(node) {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Field: "node",
			Message: fmt.Sprintf("node %q is not a member of the cluster and owns no shards (GET /v1/cluster/members lists them)", node)}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// nodeDrain marks the node draining and answers at once with what it still
// owns; the shards leave as the leader re-places them (poll GET
// /v1/nodes/{id}/shards, as `fusebox admin nodes drain` does).
func (s *Server) nodeDrain(w http.ResponseWriter, r *http.Request) error {
	return s.setDraining(w, r, true)
}

func (s *Server) nodeUndrain(w http.ResponseWriter, r *http.Request) error {
	return s.setDraining(w, r, false)
}

func (s *Server) setDraining(w http.ResponseWriter, r *http.Request, on bool) error {
	node := r.PathValue("id")
	if _, err := s.deps.Shards.SetDraining(r.Context(), node, on, s.meta(r).Author); err != nil {
		return err
	}
	out, err := s.nodeShardsOf(node)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
