package hintpolicy

import (
	"slices"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// nextGeneration is the generation of st's next publication at now: the
// higher of clock+1 (Lamport: after everything sent or seen) and the wall
// clock in milliseconds. A plain counter restarted at 1 whenever the key's
// state was forgotten (a closed key idle for KeyIdleTTL), the node
// restarted, or it missed an episode's hints, while peers (and the
// gossip layer's dedup per origin, which never forgets) kept the higher
// numbers: every later hint for the key was dropped as stale, so only
// the first outage from each node was shared (the hint review: 12 calls
// from peers instead of 0–1 for a key's second outage). Numbered by time,
// a fresh state starts above any generation published before it, unless
// the node's clock is behind the publisher's by more than the time since.
func nextGeneration(st *keyState, now time.Time) uint64 {
	return max(st.clock+1, uint64(max(now.UnixMilli(), 0)))
}

// keyState is what the policy remembers about one breaker key. Guarded by
// Policy.mu.
type keyState struct {
	// clock is the key's hybrid logical clock: the highest generation sent
	// or received. A publication uses nextGeneration.
	clock uint64
	// lastOrigin sent the hint at clock (duplicate detection across
	// origins is by (clock, origin)).
	lastOrigin string

	// This node's latest publication, for anti-entropy.
	pubState  uint8
	pubGen    uint64
	pubUntil  time.Time // natural end of the published open period
	pubReason string
	// pubRetry is the Retry-After deadline the published open hint
	// carried (zero if none): anti-entropy re-sends it while in the future.
	pubRetry  time.Time
	published bool

	// failingPub is when this node last published a failing hint for the
	// key (the rate limit: one per Timeout).
	failingPub time.Time

	// local is the breaker's state as last observed by the policy.
	local gobreaker.State
	// holdBound caps every hint-driven extension of the current open
	// episode: the first fallback deadline plus MaxHoldTimeouts·Timeout.
	// Zero when the breaker is not open.
	holdBound time.Time

	// trippers are the nodes whose own calls opened the key's breaker in
	// its current episode: the origins of the open hints heard for it (only
	// a local trip is published as open) and this node after a local trip,
	// each until its closed hint or this node's close. The key's probe
	// owner is chosen among them (probeOwnerLocked). At most maxTrippers.
	trippers []string

	// precreated: an open hint created this node's breaker for the key;
	// the slot is released once the breaker is used or evicted.
	precreated bool

	// conf is the latest confirmation round (confirm policy); distrust maps
	// the origins whose reports on the key are ignored to when that ends.
	conf     *confirmation
	distrust map[string]time.Time
	// confirmProbe: a confirmation round made this node's breaker half-open
	// and counted the probe; its transition is not counted again as warm.
	confirmProbe bool

	// deleg is the key's calls through a peer (delegate.go).
	deleg delegation

	touched time.Time
}

// idle reports whether st can be forgotten: nothing open, nothing held, no
// precreate slot, and untouched for ttl.
func (st *keyState) idle(now time.Time, ttl time.Duration) bool {
	return st.local == gobreaker.StateClosed && st.holdBound.IsZero() && !st.precreated &&
		!(st.published && st.pubState != cluster.HintClosed) && !st.conf.pending() && len(st.distrust) == 0 &&
		now.Sub(st.touched) >= ttl
}

// keyLocked returns the state of k, creating it. When the table is full it
// evicts an idle entry; if none of a few candidates is idle it returns a
// transient state that is not stored (the hint is still handled, but its
// generation is not remembered).
func (p *Policy) keyLocked(k breakerpool.Key, now time.Time) *keyState {
	if st, ok := p.keys[k]; ok {
		st.touched = now
		return st
	}
	st := &keyState{touched: now}
	if len(p.keys) >= p.cfg.MaxKeys {
		evicted := false
		tries := 0
		for victim, vs := range p.keys {
			if vs.idle(now, 0) {
				delete(p.keys, victim)
				evicted = true
				break
			}
			if tries++; tries >= 16 {
				break
			}
		}
		if !evicted {
			return st
		}
	}
	p.keys[k] = st
	return st
}

// gcLocked forgets expired distrust and idle keys. A key whose breaker the
// pool no longer has (evicted: a breaker a hint opened and no call used
// evicts as stale without a transition) is closed as far as this node is
// concerned: its last open state, hold and open publication were kept for
// ever, the key was never idle, and the table filled with such keys.
func (p *Policy) gcLocked(now time.Time) {
	for k, st := range p.keys {
		for o, until := range st.distrust {
			if !now.Before(until) {
				delete(st.distrust, o)
			}
		}
		if st.local != gobreaker.StateClosed || !st.holdBound.IsZero() || (st.published && st.pubState != cluster.HintClosed) {
			if _, ok := p.pool.Lookup(k); !ok {
				st.local, st.holdBound = gobreaker.StateClosed, time.Time{}
				if st.published {
					st.pubState = cluster.HintClosed
				}
			}
		}
		if st.idle(now, p.cfg.KeyIdleTTL) {
			delete(p.keys, k)
		}
	}
}

// sweepPrecreatedLocked releases precreate slots of breakers that were used
// (closed, automatic, with calls or transitions) or evicted.
func (p *Policy) sweepPrecreatedLocked() {
	if p.precreated == 0 {
		return
	}
	for k, st := range p.keys {
		if !st.precreated {
			continue
		}
		b, ok := p.pool.Lookup(k)
		if ok {
			s := b.Status()
			if s.State != gobreaker.StateClosed || s.Mode != breakerpool.ModeAuto ||
				(s.Counts.Requests == 0 && s.Generation == 0) {
				continue
			}
		}
		st.precreated = false
		p.precreated--
	}
	p.met.precreated.Set(float64(p.precreated))
}

// maxTrippers bounds a key's trippers; beyond it a new one is not recorded
// (the owner is chosen among the first).
const maxTrippers = 64

// addTripper records that id's own calls opened the key's breaker.
func (st *keyState) addTripper(id string) {
	if len(st.trippers) < maxTrippers && !slices.Contains(st.trippers, id) {
		st.trippers = append(st.trippers, id)
	}
}

// dropTripper forgets id as a tripper (its breaker closed).
func (st *keyState) dropTripper(id string) {
	if i := slices.Index(st.trippers, id); i >= 0 {
		st.trippers = slices.Delete(st.trippers, i, i+1)
	}
}
