package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/errcode"
	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// Deps are what the API serves. Interfaces are declared here, by their
// consumer, and kept small; nil dependencies leave their routes out.
type Deps struct {
	// Gatherer serves /metrics (the node's own registry).
	Gatherer prometheus.Gatherer
	// Logs, optional, is the node's recent log lines (GET /v1/debug/logs).
	Logs LogSource
	// Ready reports readiness for /readyz with a detail map.
	Ready func() (ready bool, detail map[string]any)
	// Store is the Raft-replicated state: its writes and the Raft node.
	Store Store
	// State is the local replica's reads of it (Store.Reader()); required
	// with Store.
	State StateReader
	// Members is the gossip membership.
	Members Members
	// Breakers is this node's breaker pool.
	Breakers Breakers
	// Ramps, optional, is this node's recovery ramps (GET /v1/breakers).
	Ramps Ramps
	// Fleet, optional, is the fleet rate budget's shares (GET /v1/breakers).
	Fleet Fleets
	// Confirm, optional, is the confirm hint policy's state per key, shown
	// with each breaker.
	Confirm Confirmations
	// Health, optional, is the last active health check per key, shown
	// with each breaker.
	Health HealthChecks
	// Peers reaches other nodes' APIs (for ?scope=cluster).
	Peers func(httpAddr string) *Client
	// UI serves the status page at /ui/ (package ui; handlers_ui.go); nil
	// leaves it out.
	UI StatusPage
	// Tasks is the durable task table (handlers_tasks.go declares it).
	Tasks TaskService
	// Shards is shard ownership and its admin operations
	// (handlers_shards.go declares the interface).
	Shards ShardAdmin
	// Ops is the operator toolkit: raft, snapshots, keyring
	// (handlers_ops.go declares the interface).
	Ops Ops
	// Handover, optional, is this node's queue as the leader's hand-over
	// call before a planned shard move reaches it (handover.go).
	Handover ShardHandover
	// Delegate, optional, makes the calls a peer's own breaker refused
	// (delegate.go).
	Delegate CallDelegate
}

// Store is the replicated state's writes and Raft node as the API uses them
// (raftstore.Store). Its reads are StateReader.
type Store interface {
	SetConfig(ctx context.Context, c state.SetConfigCommand) (state.ConfigEntry, error)
	DeleteConfig(ctx context.Context, c state.DeleteConfigCommand) (uint64, error)
	PutEndpoint(ctx context.Context, c state.PutEndpointCommand) (state.Endpoint, error)
	DeleteEndpoint(ctx context.Context, c state.DeleteEndpointCommand) (uint64, error)
	ForceBreaker(ctx context.Context, c state.ForceBreakerCommand) (state.ForcedBreaker, uint64, error)
	ApplyLocal(ctx context.Context, cmd []byte, requestID string) (*state.ApplyResult, error)
	WaitForApplied(ctx context.Context, index uint64) error

	NodeID() string
	Leader() (id, addr string)
	State() raft.RaftState
	Configuration() ([]raftstore.Server, error)
	Stats() raftstore.Stats
	// ClusterLogVersion is the lowest log version the configuration's
	// servers advertise (the version gate's view).
	ClusterLogVersion() (raftstore.ClusterVersion, error)
}

// StateReader is what the API reads of the replicated state, locally and
// stale-OK (raftstore/state.State, through raftstore.Store.Reader).
type StateReader interface {
	Config() []state.ConfigEntry
	ConfigHistory(limit int) []state.HistoryEntry
	Endpoints() []state.Endpoint
	Endpoint(name string) (state.Endpoint, bool)
	ForcedBreakers() []state.ForcedBreaker
}

// Members is the gossip view the API shows.
type Members interface {
	Members() []Member
}

// Ramps reports a key's recovery ramp on this node; ok is false when none
// is under way.
type Ramps interface {
	Ramp(k breakerpool.Key) (r BreakerRamp, ok bool)
}

// Fleets reports a key's fleet rate budget on this node; ok is false when
// the key has none.
type Fleets interface {
	Fleet(k breakerpool.Key) (f BreakerFleet, ok bool)
}

// Breakers is this node's breaker pool.
type Breakers interface {
	List() []breakerpool.Status
	Get(k breakerpool.Key) *breakerpool.Breaker
}

func (s *Server) registerRoutes() {
	if s.deps.Store != nil {
		s.configRoutes()
		s.endpointRoutes()
		s.handle("POST /internal/v1/apply", needNode, s.internalApply)
		s.handle("POST /internal/v1/apply/raw", needNode, s.internalApplyRaw)
		s.handle("GET /v1/cluster/raft", needRead, s.clusterRaft)
	}
	if s.deps.Members != nil {
		s.handle("GET /v1/cluster/members", needRead, s.clusterMembers)
	}
	if s.deps.Breakers != nil {
		s.breakerRoutes()
	}
	if s.deps.Shards != nil {
		s.shardRoutes()
	}
	if s.deps.Handover != nil {
		s.handOverRoutes()
	}
	if s.deps.Delegate != nil {
		s.delegateRoutes()
	}
	if s.deps.Tasks != nil {
		s.taskRoutes(s.deps.Tasks)
	}
	if s.deps.Ops != nil && s.deps.Store != nil {
		s.opsRoutes()
	}
	if s.deps.UI != nil {
		s.mountUI(s.deps.UI)
	}
}

// mapError turns any error a handler returns into the API's error: typed
// errors from the packages below keep their code and fields.
func (s *Server) mapError(err error) *Error {
	var (
		apiErr  *Error
		rsErr   *state.Error
		cfgErr  *dynconfig.ValidationError
		setErr  *breakerpool.SettingsError
		ownErr  *shardmap.WrongOwnerError
		maxErr  *http.MaxBytesError
		shardNo = errors.Is(err, shardmap.ErrNoSuchShard)
	)
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &cfgErr):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Key: cfgErr.Key, Field: cfgErr.Field, Message: cfgErr.Reason}
	case errors.Is(err, dynconfig.ErrUnknownKey):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error() + " (GET /v1/config lists the keys)"}
	case errors.As(err, &setErr):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Field: setErr.Field, Message: setErr.Reason}
	case errors.As(err, &ownErr):
		shard := ownErr.Shard
		return &Error{Status: http.StatusConflict, Code: CodeWrongOwner, Shard: &shard, Owner: ownErr.Owner, Epoch: ownErr.Epoch, Message: ownErr.Error()}
	case shardNo:
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error()}
	case errors.As(err, &maxErr):
		return Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body exceeds %d bytes", maxErr.Limit)
	case errors.As(err, &rsErr):
		e := &Error{Status: statusOf(rsErr.Code), Code: rsErr.Code, Message: rsErr.Message, Field: rsErr.Field, Leader: rsErr.LeaderID}
		if errcode.Retryable(e.Code) {
			e.RetryAfter = 1
		}
		return e
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "timed out: " + err.Error(), RetryAfter: 1}
	}
	s.log.Error("unexpected API error", "err", err)
	return Errorf(http.StatusInternalServerError, CodeInternal, "%v", err)
}
