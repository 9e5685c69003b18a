package breakerpool

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// TwoStepCircuitBreaker is Temporal's breaker interface: Allow grants
// permission and returns done, which the caller invokes exactly once with the
// outcome (true when the destination looked healthy).
type TwoStepCircuitBreaker interface {
	Name() string
	State() gobreaker.State
	Counts() gobreaker.Counts
	Allow() (done func(success bool), err error)
}

// Source says where a breaker's current state came from.
type Source string

const (
	// SourceLocal: this breaker's own machinery (a trip, its open timer, a
	// probe result) or its initial state.
	SourceLocal Source = "local"
	// SourceHint: a peer's gossiped hint.
	SourceHint Source = "hint"
	// SourceOperator: an operator (admin API) or a dynamic-config change.
	SourceOperator Source = "operator"
)

// Mode is the externally driven mode a breaker is in, if any.
type Mode string

const (
	// ModeAuto: no external mode; the breaker follows its own state machine.
	ModeAuto Mode = "auto"
	// ModeForcedOpen: open (or probing after the open period) because of an
	// operator's OpenFor.
	ModeForcedOpen Mode = "forced-open"
	// ModeForcedClosed: ForceClosed is in effect; every call is admitted
	// and counted, the breaker cannot trip until Auto.
	ModeForcedClosed Mode = "forced-closed"
	// ModeGuarded: closed, but only MaxRequests probe calls are admitted
	// until one resolves (Guard).
	ModeGuarded Mode = "guarded"
	// ModeDisabled: Settings.Enabled is false; a counting pass-through.
	ModeDisabled Mode = "disabled"
)

// Status is a snapshot of one breaker, for describe/list calls.
type Status struct {
	Key        Key              `json:"key"`
	State      gobreaker.State  `json:"state"`
	Counts     gobreaker.Counts `json:"counts"`
	Generation uint64           `json:"generation"`
	Source     Source           `json:"source"`
	Mode       Mode             `json:"mode"`
	// OpenRemaining is how long the breaker stays open before it probes;
	// zero unless State is open.
	OpenRemaining time.Duration `json:"open_remaining"`
	// RetryAfterUntil is the deadline of a destination's Retry-After (this
	// node's answer, or a peer's via its hint) that holds the breaker open;
	// nil unless State is open because of one.
	RetryAfterUntil *time.Time `json:"retry_after_until,omitempty"`
	Settings        Settings   `json:"settings"`
}

// TransitionKind says what a Transition event reports.
type TransitionKind uint8

const (
	// KindStateChange (the zero value): an effective state change From → To.
	// Only these reach Config.Observer.
	KindStateChange TransitionKind = iota
	// KindFailing: an early warning. A closed breaker (not guarded, not
	// forced, enabled) saw Config.WarnAfter consecutive failures without
	// tripping. Not a state change: From = To = closed, Generation is the
	// breaker's current one (no bump), Source is local. Delivered once per
	// closed-state failure streak, to Config.OnFailing only.
	KindFailing
)

// String names the kind.
func (k TransitionKind) String() string {
	if k == KindFailing {
		return "failing"
	}
	return "state"
}

// Transition is one effective state change, delivered to the pool's observer,
// or (Kind KindFailing) an early warning delivered to Config.OnFailing.
type Transition struct {
	Key        Key
	From, To   gobreaker.State
	Source     Source
	Generation uint64
	// OpenFor is the open period that starts now, when To is open.
	OpenFor time.Duration
	// RetryUntil is the Retry-After deadline (wall clock) the opening
	// honours, when To is open because of one (OpenRetryAfter); zero
	// otherwise.
	RetryUntil time.Time
	At         time.Time
	// Kind is KindStateChange for every event Config.Observer sees.
	Kind TransitionKind
	// Failures is the consecutive-failure count of a KindFailing event
	// (at least Config.WarnAfter); zero for state changes.
	Failures uint32
	// ByCheck: a health check decided this change without a call — a failed
	// check's half-open and reopening (Breaker.FailedCheck), or the settling
	// of a half-open breaker (Breaker.SettleHalfOpen). A half-open → open
	// without it is a real call's failed probe. Source is unchanged (the
	// gossip layer publishes these as it does a probe's result).
	ByCheck bool
}
