package cluster

import (
	"time"

	"fusebox/breakerpool"
)

// Hint states. The first three are transitions, in gobreaker's order
// (StateClosed=0, StateHalfOpen=1, StateOpen=2); HintFailing is the early
// warning: the origin's breaker is still closed but saw consecutive
// failures (codec v2 only, see EncodeHint).
const (
	HintClosed   uint8 = 0
	HintHalfOpen uint8 = 1
	HintOpen     uint8 = 2
	HintFailing  uint8 = 3
)

// Hint is one node's advisory report of a breaker transition, gossiped to
// every peer. It carries durations, not wall-clock instants (peers' clocks
// are not comparable), with one exception: RetryUntil, a destination's
// Retry-After deadline, which every peer must honour until the same moment
// (see hintpolicy/DESIGN.md, "Retry-After").
type Hint struct {
	// Key is the breaker the hint is about.
	Key breakerpool.Key
	// State is the origin's new state: HintClosed, HintHalfOpen or
	// HintOpen, or HintFailing (still closed, failing).
	State uint8
	// Generation is the per-key Lamport-style generation; higher is newer.
	Generation uint64
	// Origin is the node ID that made the transition. Publish sets it.
	Origin string
	// OpenFor is the origin's remaining open time when it sent the hint.
	OpenFor time.Duration
	// Reason is a short human-readable cause (for logs and the admin API).
	Reason string
	// Suspect says the origin declares itself suspect (its own egress may
	// be broken), so peers should discount the hint.
	Suspect bool
	// RetryUntil, on an open hint, is the destination's Retry-After
	// deadline (wall clock, millisecond precision) the origin opened for;
	// zero when the opening was not caused by a Retry-After. Encoded in
	// codec v3 only.
	RetryUntil time.Time
}

// HintSink receives hints from peers. It is declared here for the breaker
// policy to implement. HandleHint runs on the cluster's message worker (or a
// memberlist push/pull goroutine) and must not block.
//
// The cluster has already dropped invalid, rate-limited, stale and duplicate
// hints for (Key, Origin). fresh reports that the sink had not seen this
// (Key, Origin, Generation) before and acted on it; only fresh hints are
// re-gossiped. Hints from different push/pull exchanges can arrive
// concurrently: the sink orders by Generation itself.
type HintSink interface {
	HandleHint(h Hint) (fresh bool)
}

// HintSource lists this node's latest hint for every key that is not
// closed, for push/pull anti-entropy. OpenHints runs on memberlist's
// push/pull goroutine every PushPullInterval and on join; it must be quick.
type HintSource interface {
	OpenHints() []Hint
}

// HintResult classifies a received hint; it is the result label of
// fusebox_hints_received_total.
type HintResult string

// Hint results.
const (
	HintApplied     HintResult = "applied"     // delivered; the sink reported it fresh
	HintIgnored     HintResult = "ignored"     // delivered; the sink reported it not fresh
	HintStale       HintResult = "stale"       // older generation than one seen from that origin
	HintDuplicate   HintResult = "duplicate"   // same generation already seen from that origin
	HintInvalid     HintResult = "invalid"     // failed to decode or validate
	HintRateLimited HintResult = "ratelimited" // origin over its rate limit
	HintSelf        HintResult = "self"        // this node's own hint, echoed back
	HintNoSink      HintResult = "nosink"      // no HintSink registered yet
	HintDropped     HintResult = "dropped"     // inbound queue full
	// HintUnknownOrigin: gossiped from an origin that is not an alive or
	// suspect member. Every origin had a rate limiter of its own, so made-up
	// origins (a gossip-key holder's) went unlimited and each was queued for
	// re-gossip.
	HintUnknownOrigin HintResult = "unknown_origin"
)
