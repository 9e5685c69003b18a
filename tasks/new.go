package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"fusebox/breakerpool"
	"fusebox/errcode"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
	"fusebox/transport"
)

// Env is what building a task reads from its node: the endpoint registry
// (and a read barrier for a lagging replica), the destination policy, the
// shard count and the backlog limits from dynamic config. api.TaskService
// has every method (node.TaskAPI implements them). An Env that also
// implements ScheduleToCloser resolves the deadline from dynamic config.
type Env interface {
	Endpoint(name string) (state.Endpoint, bool)
	// Sync is a read barrier: it returns once the local replica has applied
	// everything committed before the call.
	Sync(ctx context.Context) error
	// CheckDestination reports why rawURL may not be called for namespace
	// (a *transport.DestinationError), or nil; allowlist: check the
	// namespace's allowlist too, not only the members' addresses.
	CheckDestination(ctx context.Context, namespace, rawURL string, allowlist bool) error
	ShardCount() int
	// SubmitLimits are the backlog limits for namespace and a breaker
	// destination: pending tasks per (namespace, destination) and in the
	// whole table; 0: none.
	SubmitLimits(namespace, destination string) (perDestination, pending int)
}

// Error is a submit New refused. Code is from package errcode:
// invalid_argument (Field names the submit's JSON field: destination,
// request.header, …), payload_too_large (Field "request"), or unavailable
// (retry: the node could not check the submit against the cluster).
type Error struct {
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string {
	s := e.Code
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Message
}

// Retryable reports whether the same submit may be sent again unchanged.
func (e *Error) Retryable() bool { return errcode.Retryable(e.Code) }

func badField(field, format string, args ...any) *Error {
	return &Error{Code: errcode.InvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Field limits of a Submit, in bytes.
const (
	MaxIDBytes          = 256  // namespace_id, workflow_id, request_id
	MaxDestinationBytes = 2048 // destination
)

// New validates one submit and builds the task to propose: its id (from
// at, the command's time), its shard, its request as stored (the
// transport.Request as JSON, with the callback URL or the endpoint name's
// target as checked now), its deadline, its breaker destination and the
// backlog limits it counts against. An error is an *Error naming the
// field, or what env.CheckDestination returned that is not a
// *transport.DestinationError.
func New(ctx context.Context, env Env, in *Submit, at time.Time) (state.NewTask, error) {
	if err := checkFields(in); err != nil {
		return state.NewTask{}, err
	}
	req := in.Request.outbound(in.TaskGroup)
	// The URL the request is validated with: the callback URL itself, or
	// the endpoint's target now (re-resolved at every delivery, since
	// endpoints can change; raftstore/state/TASKS.md).
	check := req
	switch in.TaskGroup {
	case breakerpool.TaskGroupCallback:
		req.URL, check.URL = in.Destination, in.Destination
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation:
		url, err := endpointURL(ctx, env, in.Destination)
		if err != nil {
			return state.NewTask{}, err
		}
		check.URL = url
	case "":
		return state.NewTask{}, badField("task_group", "required")
	default:
		return state.NewTask{}, badField("task_group", "unknown task group %q (want %q, %q or %q)", in.TaskGroup,
			breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback)
	}
	id := state.NewTaskID(at)
	if check.RequestID == "" {
		check.RequestID = id // the queue sends the task id when none is given
	}
	if err := check.Validate(); err != nil {
		var ve *transport.ValidationError
		if errors.As(err, &ve) {
			return state.NewTask{}, badField(requestField(ve.Field), "%s", ve.Reason)
		}
		return state.NewTask{}, badField("request", "%v", err)
	}
	// A callback URL must be in its namespace's allowlist; an endpoint's
	// URL was checked against the global list when an operator registered
	// it. Neither may reach a member.
	if err := env.CheckDestination(ctx, in.NamespaceID, check.URL, in.TaskGroup == breakerpool.TaskGroupCallback); err != nil {
		var de *transport.DestinationError
		if errors.As(err, &de) {
			return state.NewTask{}, badField("destination", "%s", de.Reason)
		}
		return state.NewTask{}, err
	}
	raw, err := transport.EncodeRequest(&req)
	if err != nil {
		return state.NewTask{}, badField("request", "%v", err)
	}
	if len(raw) > state.MaxTaskRequestBytes {
		return state.NewTask{}, &Error{Code: errcode.TooLarge, Field: "request",
			Message: fmt.Sprintf("the request is %d bytes encoded, over the %d byte limit per task", len(raw), state.MaxTaskRequestBytes)}
	}
	dl, err := deadline(env, in, at)
	if err != nil {
		return state.NewTask{}, err
	}
	n := env.ShardCount()
	if n <= 0 {
		return state.NewTask{}, &Error{Code: errcode.Unavailable, Message: "the cluster has no shard count yet"}
	}
	nt := state.NewTask{
		ID: id, Shard: shardmap.ShardOf(in.NamespaceID, in.WorkflowID, n), NamespaceID: in.NamespaceID, WorkflowID: in.WorkflowID,
		TaskGroup: in.TaskGroup, Destination: in.Destination, RequestID: in.RequestID, Request: raw, Deadline: dl,
	}
	// The breaker destination the backlog limits count by; the limits are
	// resolved here and carried in the command (the FSM reads no config).
	key := transport.BreakerDestination(in.TaskGroup, in.Destination)
	if key != in.Destination {
		nt.DestinationKey = key
	}
	nt.MaxDestinationBacklog, nt.MaxPendingTasks = env.SubmitLimits(in.NamespaceID, key)
	return nt, nil
}

// checkFields checks the submit's plain string fields: present (but
// request_id), bounded, no control characters.
func checkFields(in *Submit) *Error {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"namespace_id", in.NamespaceID, MaxIDBytes}, {"workflow_id", in.WorkflowID, MaxIDBytes},
		{"destination", in.Destination, MaxDestinationBytes}, {"request_id", in.RequestID, MaxIDBytes},
	} {
		switch {
		case strings.TrimSpace(f.v) == "" && f.name != "request_id":
			return badField(f.name, "required")
		case len(f.v) > f.max:
			return badField(f.name, "longer than %d bytes", f.max)
		case strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return badField(f.name, "contains control characters")
		}
	}
	return nil
}

// endpointURL is the registered target of a Nexus endpoint name. This
// replica may lag (just restarted, back from a pause): before calling a
// name unknown, it reads through the leader once.
func endpointURL(ctx context.Context, env Env, name string) (string, error) {
	if ep, ok := env.Endpoint(name); ok {
		return ep.URL, nil
	}
	if err := env.Sync(ctx); err != nil {
		return "", &Error{Code: errcode.Unavailable,
			Message: "this node cannot check the endpoint against the cluster right now; retry: " + err.Error()}
	}
	ep, ok := env.Endpoint(name)
	if !ok {
		return "", badField("destination", "unknown nexus endpoint %q (GET /v1/endpoints lists them)", name)
	}
	return ep.URL, nil
}
