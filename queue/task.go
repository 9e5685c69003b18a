// Package queue is fusebox's outbound task queue: per-shard readers that load
// due tasks from the replicated task table, and a host-wide scheduler that
// groups them by (TaskGroup, NamespaceID, Destination) and runs each group
// through buffer → concurrency limiter → circuit breaker → rate limiter →
// executor, then writes the outcomes back in batched, epoch-fenced writes.
//
// Durable storage is not here: the queue works against the small Store,
// Ownership, LimitsSource, Breakers, Executor and Resolver interfaces
// declared in deps.go. See DESIGN.md for the load-bearing decisions.
package queue

import (
	"fusebox/breakerpool"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// Task statuses: the stored task's words (state.TaskPending …). Pending is
// the only non-terminal one.
const (
	StatusPending   = state.TaskPending
	StatusSucceeded = state.TaskSucceeded
	StatusFailed    = state.TaskFailed
	StatusDLQ       = state.TaskDLQ
)

// Task is one outbound task as the queue sees it: the stored task, a row of
// the task table (state.Task, the same type under the queue's name: both
// stores return it as they store it). Its Request is the stored call, an
// transport.Request as JSON; the queue decodes it once per item
// (decodeRequest). TaskGroup is one of breakerpool.TaskGroup*; anything else
// is poison. Deadline (zero: none) bounds delivery (deadline.go).
type Task = state.Task

// Result is the outcome of one dispatch of a task, written back through
// Store.Complete: state.TaskResult, the result a store applies
// (TaskResult.Apply), under the queue's name. Status is terminal, or
// StatusPending for a retry (then NextAttemptAt says when). The counters
// are the task's new values; Started makes it a start marker
// (redelivery.go).
type Result = state.TaskResult

// KeyOf is t's scheduler group and breaker key. Its Destination is
// transport.BreakerDestination: the endpoint name, or a callback URL's
// scheme://host[:port] — never a path or a query (Temporal's key). This is
// the one place a task's key is derived; the limits and timeouts the queue
// looks up in dynamic config use the same destination.
func KeyOf(t *Task) breakerpool.Key {
	return breakerpool.Key{TaskGroup: t.TaskGroup, NamespaceID: t.NamespaceID,
		Destination: transport.BreakerDestination(t.TaskGroup, t.Destination)}
}

// decodeRequest decodes a task's stored request. One that no longer
// decodes (written by another version) comes back with a task group that
// cannot match, so process dead-letters it as poison with the reason.
func decodeRequest(t *Task) transport.Request {
	req, err := transport.DecodeRequest(t.Request)
	if err != nil {
		msg := err.Error()
		if len(msg) > 200 {
			msg = msg[:200]
		}
		req = transport.Request{TaskGroup: "undecodable request: " + msg}
	}
	return req
}

// knownTaskGroup reports whether g is a task group the queue can deliver.
func knownTaskGroup(g string) bool {
	switch g {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback:
		return true
	}
	return false
}

// isNexus reports whether g's URL comes from the endpoint registry.
func isNexus(g string) bool {
	return g == breakerpool.TaskGroupNexusInvocation || g == breakerpool.TaskGroupNexusCancelation
}
