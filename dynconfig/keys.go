// Package dynconfig is fusebox's dynamic configuration registry: typed keys,
// validation, constraint resolution and change subscription. Storage is not
// here: raftstore stores opaque Entry values, calls Validate/Canonical before
// proposing and inside its FSM, and hands the whole table to
// Collection.Update whenever it changes. Everything in this package except
// Collection is a pure, deterministic function of its input.
//
// Temporal's common/dynamicconfig is the model: typed settings, constraints,
// most-specific-wins precedence, subscriptions.
package dynconfig

import (
	"encoding/json"
	"time"

	"fusebox/breakerpool"
)

// Registered keys. Temporal's names where Temporal has the setting.
const (
	// KeyBreakerSettings is the per-destination circuit breaker settings
	// object (breakerpool.Settings without HintPolicy).
	KeyBreakerSettings = "history.outboundQueue.circuitBreakerSettings"
	// KeyOutboundTaskBatchSize is how many tasks a shard reader loads per
	// batch; 0 stops the reader.
	KeyOutboundTaskBatchSize = "history.outboundTaskBatchSize"
	// KeyGroupLimiterBufferSize is the per-group buffer in front of the
	// concurrency limiter.
	KeyGroupLimiterBufferSize = "history.outboundQueue.groupLimiter.bufferSize"
	// KeyGroupLimiterConcurrency is the per-group number of calls in flight.
	KeyGroupLimiterConcurrency = "history.outboundQueue.groupLimiter.concurrency"
	// KeyHostSchedulerMaxTaskRPS is the per-group rate limit (burst = rate).
	KeyHostSchedulerMaxTaskRPS = "history.outboundQueue.hostScheduler.maxTaskRPS"
	// KeyBreakerHintPolicy is what a breaker does with peers' gossiped hints.
	KeyBreakerHintPolicy = "fusebox.breaker.hintPolicy"
	// KeyNexusRequestTimeout is the outbound Nexus request timeout.
	KeyNexusRequestTimeout = "component.nexusoperations.request.timeout"
	// KeyCallbackRequestTimeout is the outbound completion callback timeout.
	KeyCallbackRequestTimeout = "component.callbacks.request.timeout"
	// KeyTaskRetention is how long terminal tasks stay readable before the
	// leader collects them.
	KeyTaskRetention = "fusebox.tasks.retention"
	// KeyTaskMaxShardBacklog is retired and has no effect: a shard holds
	// every destination's tasks, so one dead destination filled it for all.
	// It stays registered so that stored values and old log entries still
	// validate. KeyTaskMaxDestinationBacklog replaced it.
	KeyTaskMaxShardBacklog = "fusebox.tasks.maxShardBacklog"
	// KeyRedactHeaderNames lists request header names whose values are
	// shown as "<redacted>", on top of the built-in secret names.
	KeyRedactHeaderNames = "fusebox.redaction.headerNames"
	// KeyCallbackAllowedAddresses is Temporal's per-namespace destination
	// allowlist: [{"Pattern": "host[:port] glob", "AllowInsecure": bool}].
	KeyCallbackAllowedAddresses = "component.callbacks.allowedAddresses"

	// Temporal's retry policies of outbound calls (components/nexusoperations
	// and components/callbacks config.go): the first delay after a failed
	// attempt and the cap of the exponential backoff (coefficient 2).
	KeyNexusRetryInitialInterval    = "component.nexusoperations.retryPolicy.initialInterval"
	KeyNexusRetryMaxInterval        = "component.nexusoperations.retryPolicy.maxInterval"
	KeyCallbackRetryInitialInterval = "component.callbacks.retryPolicy.initialInterval"
	KeyCallbackRetryMaxInterval     = "component.callbacks.retryPolicy.maxInterval"
	// KeyNexusMinRequestTimeout is Temporal's MinRequestTimeout: a Nexus
	// call is not made when less than this remains before the task's
	// deadline; the task fails "deadline exceeded" instead.
	KeyNexusMinRequestTimeout = "component.nexusoperations.limit.request.timeout.min"
	// KeyTaskDLQUnexpectedErrorAttempts is how many unexpected errors send a
	// task to the DLQ (Temporal's history.TaskDLQUnexpectedErrorAttempts).
	KeyTaskDLQUnexpectedErrorAttempts = "history.TaskDLQUnexpectedErrorAttempts"
	// KeyNexusMaxScheduleToCloseTimeout is Temporal's cap on a Nexus
	// operation's schedule-to-close timeout (0: no cap).
	KeyNexusMaxScheduleToCloseTimeout = "component.nexusoperations.limit.scheduleToCloseTimeout"
	// KeyTaskScheduleToCloseTimeout is fusebox's default schedule-to-close
	// timeout of a task submitted without one (0: no deadline).
	KeyTaskScheduleToCloseTimeout = "fusebox.tasks.defaultScheduleToCloseTimeout"
	// KeyMetricsDestinationSeriesLimit is how many closed breakers (the
	// busiest) get per-destination metric series of their own on a node;
	// the others are summed under destination "_other"; -1 means no cap.
	KeyMetricsDestinationSeriesLimit = "fusebox.metrics.destinationSeriesLimit"
	// KeyBreakerCallThroughPeer says whether a node whose own calls to a
	// destination fail where a peer's pass makes the calls its open breaker
	// refuses through that peer (hintpolicy/DESIGN.md, "Calls through a
	// peer"): CallThroughPeerOn (default) or CallThroughPeerOff.
	KeyBreakerCallThroughPeer = "fusebox.breaker.callThroughPeer"
	// KeyBreakerMaxRetryAfter caps how long a destination's Retry-After
	// (on a 429 or 503 answer) holds its breaker open, on this node and,
	// through the gossiped deadline, on every peer; 0 ignores Retry-After.
	KeyBreakerMaxRetryAfter = "fusebox.breaker.maxRetryAfter"
)

// Staged recovery (issue 19 §2, docs/operations.md "Recovery ramp").
const (
	// KeyRampStartRPS is the fleet-wide rate a destination gets in the first
	// second after its breaker closes; each node takes its share of it.
	KeyRampStartRPS = "fusebox.destination.rampStartRPS"
	// KeyRampDuration is how long the ramp from KeyRampStartRPS to the
	// configured rate lasts; 0 turns the ramp off.
	KeyRampDuration = "fusebox.destination.rampDuration"

	DefaultRampStartRPS = 10.0
	DefaultRampDuration = 10 * time.Second
)

// Fleet rate budget (issue 19 §3, docs/operations.md "Fleet rate budget").
const (
	// KeyFleetRPS is a destination's rate for the whole fleet: the nodes
	// with tasks for it share it, weighted by their backlogs; 0 is off
	// (each node keeps its own per-host rate).
	KeyFleetRPS = "fusebox.destination.fleetRPS"
)

// Defaults of the scalar keys (Temporal's, see REFERENCE.md).
const (
	DefaultOutboundTaskBatchSize   = 100
	DefaultGroupLimiterBufferSize  = 100
	DefaultGroupLimiterConcurrency = 100
	DefaultHostSchedulerMaxTaskRPS = 100.0
	DefaultRequestTimeout          = 10 * time.Second
	DefaultTaskRetention           = 24 * time.Hour
	DefaultTaskMaxShardBacklog     = 10_000
	// Temporal's retry policy defaults for Nexus operations and callbacks.
	DefaultRetryInitialInterval = time.Second
	DefaultRetryMaxInterval     = time.Hour
	// DefaultNexusMinRequestTimeout is Temporal's (1.5s).
	DefaultNexusMinRequestTimeout = 1500 * time.Millisecond
	// DefaultTaskDLQUnexpectedErrorAttempts is Temporal's default. Retried
	// with the task's retry policy (1s × 2ⁿ, ≤ 1h), 70 errors span about
	// 59 hours; the 5 fusebox used before sent a task to the DLQ in ~30 s.
	DefaultTaskDLQUnexpectedErrorAttempts = 70
	// DefaultTaskScheduleToCloseTimeout bounds a task submitted without a
	// deadline: a week outlasts any outage worth waiting for (~170 attempts
	// at the 1h cap) yet ends tasks that would otherwise retry forever (a
	// destination answering 3xx). DESIGN.md says why.
	DefaultTaskScheduleToCloseTimeout = 7 * 24 * time.Hour
	// MaxScheduleToCloseTimeout bounds every schedule-to-close timeout.
	MaxScheduleToCloseTimeout = 3650 * 24 * time.Hour
)

// Destination isolation and the node-wide guard (docs/operations.md,
// "Backlog limits").
const (
	// KeyTaskMaxDestinationBacklog is how many pending tasks a namespace may
	// hold for one breaker destination (a Nexus endpoint, or a callback's
	// scheme://host) before submits for it get 429; 0 means no limit.
	KeyTaskMaxDestinationBacklog = "fusebox.tasks.maxDestinationBacklog"
	// KeyTaskMaxPendingTasks is how many pending tasks the whole table may
	// hold (every node keeps them all in memory) before every submit gets
	// 429; 0 means no limit.
	KeyTaskMaxPendingTasks = "fusebox.tasks.maxPendingTasks"
	// KeyTaskMinFreeDiskMB is the free space (MiB) a node's data dir must
	// keep: below it, that node answers submits with 503; 0 turns it off.
	KeyTaskMinFreeDiskMB = "fusebox.tasks.minFreeDiskMB"
	// KeyTaskMaxOutputBytes bounds the output of a Nexus start answered
	// synchronously, as stored (its JSON form): above it the task fails as
	// too large. Every replica keeps a result's output for the retention,
	// so this bounds what one destination's answers cost every node.
	KeyTaskMaxOutputBytes = "fusebox.tasks.maxOutputBytes"

	DefaultTaskMaxDestinationBacklog = 100_000
	DefaultTaskMaxPendingTasks       = 1_000_000
	DefaultTaskMinFreeDiskMB         = 256
	// DefaultTaskMaxOutputBytes is the most any store keeps
	// (raftstore/state.MaxTaskOutputBytes), and the key's upper bound.
	DefaultTaskMaxOutputBytes = 1 << 20
)

// DefaultMetricsDestinationSeriesLimit is breakerpool's default.
const DefaultMetricsDestinationSeriesLimit = breakerpool.DefaultSeriesLimit

// registry is the registration table: one line per key. Order is the order
// Keys lists them in; the index of a key is its slot in a Snapshot.
var registry = []*definition{
	settingsKey(KeyBreakerSettings, PerNamespaceDestination,
		"circuit breaker settings per destination; omitted fields keep their defaults"),
	intKey(KeyOutboundTaskBatchSize, DefaultOutboundTaskBatchSize, 0, 10_000, GlobalOnly,
		"tasks a shard reader loads per batch; 0 stops the reader"),
	intKey(KeyGroupLimiterBufferSize, DefaultGroupLimiterBufferSize, 1, 1_000_000, PerNamespaceDestination,
		"tasks buffered per (task group, namespace, destination) before the concurrency limiter"),
	intKey(KeyGroupLimiterConcurrency, DefaultGroupLimiterConcurrency, 1, 100_000, PerNamespaceDestination,
		"calls in flight per (task group, namespace, destination)"),
	floatKey(KeyHostSchedulerMaxTaskRPS, DefaultHostSchedulerMaxTaskRPS, 1_000_000, PerNamespaceDestination,
		"calls per second per (task group, namespace, destination) on this host; burst = rate"),
	enumKey(KeyBreakerHintPolicy, string(breakerpool.HintConfirm),
		[]string{string(breakerpool.HintProbe), string(breakerpool.HintAdopt), string(breakerpool.HintOff), string(breakerpool.HintConfirm)},
		PerNamespaceDestination, "what a breaker does with peers' gossiped hints: confirm (default), probe, adopt or off"),
	durationKey(KeyNexusRequestTimeout, DefaultRequestTimeout, 24*time.Hour, PerNamespaceDestination,
		"timeout of one outbound Nexus request (start or cancel)"),
	durationKey(KeyCallbackRequestTimeout, DefaultRequestTimeout, 24*time.Hour, PerNamespaceDestination,
		"timeout of one outbound completion callback request"),
	durationKey(KeyTaskRetention, DefaultTaskRetention, 365*24*time.Hour, GlobalOnly,
		"how long succeeded and failed tasks stay readable before they are collected"),
	intKey(KeyTaskMaxShardBacklog, DefaultTaskMaxShardBacklog, 0, 10_000_000, GlobalOnly,
		"retired, no effect: replaced by fusebox.tasks.maxDestinationBacklog (a shard holds every destination's tasks)"),
	headerNamesKey(KeyRedactHeaderNames, PerNamespaceDestination,
		"request header names whose values every read shows as <redacted>, besides Authorization, Cookie, X-Api-Key and names containing token, secret, key, signature, auth, password, passwd, credential, session, cookie or jwt"),
	allowedAddressesKey(KeyCallbackAllowedAddresses, PerNamespace,
		`destinations a namespace may call: [{"Pattern":"host[:port] glob","AllowInsecure":false}]; unset: the node's default (docs/security.md); members' addresses are always refused`),
	// Destination isolation and the node-wide guard.
	intKey(KeyTaskMaxDestinationBacklog, DefaultTaskMaxDestinationBacklog, 0, 10_000_000, PerNamespaceDestination,
		"pending tasks a namespace may hold for one breaker destination (endpoint name, or scheme://host of a callback) before submits for it get 429; 0 means no limit"),
	intKey(KeyTaskMaxPendingTasks, DefaultTaskMaxPendingTasks, 0, 100_000_000, GlobalOnly,
		"pending tasks the cluster may hold in all (every node keeps them in memory) before every submit gets 429; 0 means no limit"),
	intKey(KeyTaskMinFreeDiskMB, DefaultTaskMinFreeDiskMB, 0, 100_000_000, GlobalOnly,
		"free MiB a node's data dir must keep; below it the node answers submits with 503; 0 turns the check off"),
	// Appended (issue 20 §6); never reorder: a key's index is its slot.
	durationKey(KeyNexusRetryInitialInterval, DefaultRetryInitialInterval, 24*time.Hour, PerNamespaceDestination,
		"first retry delay of a Nexus start/cancel whose destination was down or that hit an unexpected error; doubles per attempt"),
	durationKey(KeyNexusRetryMaxInterval, DefaultRetryMaxInterval, 30*24*time.Hour, PerNamespaceDestination,
		"cap of the Nexus retry delay"),
	durationKey(KeyCallbackRetryInitialInterval, DefaultRetryInitialInterval, 24*time.Hour, PerNamespaceDestination,
		"first retry delay of a completion callback whose destination was down or that hit an unexpected error; doubles per attempt"),
	durationKey(KeyCallbackRetryMaxInterval, DefaultRetryMaxInterval, 30*24*time.Hour, PerNamespaceDestination,
		"cap of the callback retry delay"),
	durationZeroKey(KeyNexusMinRequestTimeout, DefaultNexusMinRequestTimeout, 24*time.Hour, PerNamespace,
		"a Nexus call is not made when less than this remains before the task's deadline: the task fails with deadline exceeded"),
	intKey(KeyTaskDLQUnexpectedErrorAttempts, DefaultTaskDLQUnexpectedErrorAttempts, 1, 1_000_000, GlobalOnly,
		"unexpected errors (resolver errors, executor panics, unclassified errors) after which a task goes to the DLQ"),
	durationZeroKey(KeyNexusMaxScheduleToCloseTimeout, 0, MaxScheduleToCloseTimeout, PerNamespace,
		"cap of a Nexus task's schedule-to-close timeout, given or defaulted; 0 means no cap"),
	durationZeroKey(KeyTaskScheduleToCloseTimeout, DefaultTaskScheduleToCloseTimeout, MaxScheduleToCloseTimeout, PerNamespaceDestination,
		"schedule-to-close timeout of a task submitted without one: undelivered by then, it fails with deadline exceeded; 0 means no deadline"),
	intKey(KeyMetricsDestinationSeriesLimit, DefaultMetricsDestinationSeriesLimit, -1, 1_000_000, GlobalOnly,
		`closed breakers (the busiest) with per-destination metric series of their own; the others are summed under destination "_other" (open and half-open ones always have their own, up to 1000); -1: no cap`),
	// Staged recovery (issue 19 §2).
	floatKey(KeyRampStartRPS, DefaultRampStartRPS, 1_000_000, PerNamespaceDestination,
		"calls per second the whole fleet sends a destination in the first second after its breaker closes; each node takes its share (1/live members, or its fleet-budget share)"),
	durationZeroKey(KeyRampDuration, DefaultRampDuration, time.Hour, PerNamespaceDestination,
		"after a breaker closes, the destination's rate rises in 1 s stages from rampStartRPS to its configured rate over this long; 0 turns the ramp off"),
	// Fleet rate budget (issue 19 §3).
	floatZeroKey(KeyFleetRPS, 0, 1_000_000, PerNamespaceDestination,
		"calls per second the whole fleet may send a destination, shared by the nodes with tasks for it in proportion to their backlogs (gossiped); each node's share also stays under its per-host rate; 0 turns the budget off"),
	durationZeroKey(KeyBreakerMaxRetryAfter, breakerpool.DefaultMaxRetryAfter, breakerpool.DefaultMaxOpenFor, PerNamespaceDestination,
		"cap of the wait a 429 or 503 answer's Retry-After imposes: the breaker opens until the destination's deadline on this node and every peer; 0 ignores Retry-After (such answers count as ordinary failures)"),
	// Active health checks (issue 19 §4).
	healthPathKey(KeyDestinationHealthPath, PerNamespaceDestination,
		`health check of a callback destination (scheme://host): while its breaker is open the probe owner GETs scheme://host + this path every 10s (2s timeout, 200 passes) instead of spending a task; "" (default): none`),
	// Isolation between destinations (thirty-seventh session).
	intKey(KeyTaskMaxOutputBytes, DefaultTaskMaxOutputBytes, 1, DefaultTaskMaxOutputBytes, PerNamespaceDestination,
		"bytes a Nexus start's synchronous output may take as stored (JSON); a larger one fails the task as too large (not a destination failure); every replica keeps outputs for the retention"),
	// Calls through a peer (forty-sixth session).
	enumKey(KeyBreakerCallThroughPeer, CallThroughPeerOn, []string{CallThroughPeerOn, CallThroughPeerOff}, PerNamespaceDestination,
		"on (default): when this node's calls to the destination fail where a peer's pass (its egress is broken, the destination is not), the calls its open breaker refuses are made through that peer; off: they wait for this node's own breaker (for destinations that must see each node's own address)"),
}

// byName maps a key name to its index in registry.
var byName = func() map[string]int {
	m := make(map[string]int, len(registry))
	for i, d := range registry {
		if _, dup := m[d.name]; dup {
			panic("dynconfig: key registered twice: " + d.name)
		}
		m[d.name] = i
	}
	return m
}()

// Indexes of the keys the typed getters read.
var (
	idxBreakerSettings  = byName[KeyBreakerSettings]
	idxBatchSize        = byName[KeyOutboundTaskBatchSize]
	idxBufferSize       = byName[KeyGroupLimiterBufferSize]
	idxConcurrency      = byName[KeyGroupLimiterConcurrency]
	idxMaxTaskRPS       = byName[KeyHostSchedulerMaxTaskRPS]
	idxHintPolicy       = byName[KeyBreakerHintPolicy]
	idxNexusTimeout     = byName[KeyNexusRequestTimeout]
	idxCallbackTimeout  = byName[KeyCallbackRequestTimeout]
	idxRedactHeaders    = byName[KeyRedactHeaderNames]
	idxAllowedAddresses = byName[KeyCallbackAllowedAddresses]
	idxNexusRetryInit   = byName[KeyNexusRetryInitialInterval]
	idxNexusRetryMax    = byName[KeyNexusRetryMaxInterval]
	idxCbRetryInit      = byName[KeyCallbackRetryInitialInterval]
	idxCbRetryMax       = byName[KeyCallbackRetryMaxInterval]
	idxNexusMinTimeout  = byName[KeyNexusMinRequestTimeout]
	idxDLQAttempts      = byName[KeyTaskDLQUnexpectedErrorAttempts]
	idxNexusMaxS2C      = byName[KeyNexusMaxScheduleToCloseTimeout]
	idxTaskS2C          = byName[KeyTaskScheduleToCloseTimeout]
	idxRampStartRPS     = byName[KeyRampStartRPS]
	idxRampDuration     = byName[KeyRampDuration]
	idxMaxRetryAfter    = byName[KeyBreakerMaxRetryAfter]
	idxHealthPath       = byName[KeyDestinationHealthPath]
	idxMaxOutputBytes   = byName[KeyTaskMaxOutputBytes]
	idxFleetRPS         = byName[KeyFleetRPS]
	idxCallThroughPeer  = byName[KeyBreakerCallThroughPeer]
)

// Values of KeyBreakerCallThroughPeer.
const (
	CallThroughPeerOn  = "on"
	CallThroughPeerOff = "off"
)

// KeyInfo describes one registered key; the API serves the list.
type KeyInfo struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Default     json.RawMessage `json:"default"`
	Constraints []Constraint    `json:"constraints"`
	Description string          `json:"description"`
}

// Keys lists the registered keys in registration order. The result is a
// fresh copy the caller may keep or modify.
func Keys() []KeyInfo {
	out := make([]KeyInfo, len(registry))
	for i, d := range registry {
		out[i] = KeyInfo{
			Name:        d.name,
			Type:        d.typ,
			Default:     append(json.RawMessage(nil), d.defRaw...),
			Constraints: d.scope.Constraints(),
			Description: d.desc,
		}
	}
	return out
}

// IsKey reports whether name is a registered key.
func IsKey(name string) bool {
	_, ok := byName[name]
	return ok
}
