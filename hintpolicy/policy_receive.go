package hintpolicy

import (
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// HandleHint applies a peer's hint (HintSink). It runs on the membership's
// message worker or a push/pull goroutine and does not block.
//
// Order: a hint older than the key's Lamport clock is stale, one equal to it
// from the same origin a duplicate; the clock then advances. Open,
// half-open and failing hints from an origin that declares itself suspect —
// by the hint's flag or its member metadata — are ignored. Then the
// destination's HintPolicy decides (see applyOpenLocked and
// applyFailingLocked; both may precreate the breaker of an unused key); a
// closed hint warm-starts the probe of an open breaker. fresh is false for stale, duplicate and ignored
// hints, so only useful news is re-gossiped.
func (p *Policy) HandleHint(h cluster.Hint) (fresh bool) {
	if !p.running.Load() {
		return false
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.keyLocked(h.Key, now)
	switch {
	case h.Generation < st.clock:
		p.met.actions.WithLabelValues(ActionStale).Inc()
		return false
	case h.Generation == st.clock && h.Origin == st.lastOrigin:
		p.met.actions.WithLabelValues(ActionDuplicate).Inc()
		return false
	}
	st.clock, st.lastOrigin = h.Generation, h.Origin
	p.delegateHintLocked(st, h, now)

	if h.State == cluster.HintClosed {
		st.dropTripper(h.Origin)
		b, ok := p.pool.Lookup(h.Key)
		if ok && b.Settings().HintPolicy == breakerpool.HintConfirm {
			p.confirmClosedLocked(b, h, st, now)
		}
		if !ok || b.Settings().HintPolicy == breakerpool.HintOff || b.State() != gobreaker.StateOpen {
			p.met.actions.WithLabelValues(ActionRecorded).Inc()
			return true
		}
		b.ProbeNow(breakerpool.SourceHint)
		p.met.actions.WithLabelValues(ActionWarm).Inc()
		return true
	}

	if h.Suspect || p.originSuspect(h.Origin) {
		p.met.actions.WithLabelValues(ActionIgnoredSuspect).Inc()
		return false
	}
	if h.State == cluster.HintOpen {
		st.addTripper(h.Origin) // only a local trip is published as open
	}
	b, ok := p.pool.Lookup(h.Key)
	if !ok {
		// A precreate slot is released through the key's stored state
		// (sweepPrecreatedLocked); a transient one (the table is full)
		// could never give it back, and the slots ran out for good.
		if _, stored := p.keys[h.Key]; !stored || p.precreated >= p.cfg.MaxPrecreated {
			p.met.actions.WithLabelValues(ActionSkipUnknown).Inc()
			return true
		}
		b = p.pool.Get(h.Key)
		if !st.precreated {
			st.precreated = true
			p.precreated++
			p.met.precreated.Set(float64(p.precreated))
		}
		p.met.actions.WithLabelValues(ActionPrecreate).Inc()
	}
	// A Retry-After deadline is the destination's own word, not a report
	// to confirm: every policy honours it first.
	if a, ok := p.applyRetryAfterLocked(b, h); ok {
		p.met.actions.WithLabelValues(a).Inc()
		return true
	}
	if b.Settings().HintPolicy == breakerpool.HintConfirm {
		action := p.applyConfirmLocked(b, h, st, now)
		p.met.actions.WithLabelValues(action).Inc()
		return action != ActionDistrusted // a distrusted report is not re-gossiped
	}
	if h.State == cluster.HintFailing {
		p.met.actions.WithLabelValues(p.applyFailingLocked(b)).Inc()
		return true
	}
	p.met.actions.WithLabelValues(p.applyOpenLocked(b, h, st, now)).Inc()
	return true
}

// originSuspect reports whether the origin's member metadata declares it
// suspect.
func (p *Policy) originSuspect(origin string) bool {
	m, ok := p.members.Member(origin)
	return ok && m.Meta.Suspect
}

// applyOpenLocked applies an open or half-open hint to b and names the
// action taken.
//
//   - off: nothing.
//   - probe: a closed automatic breaker is guarded (admits MaxRequests
//     probes until one resolves).
//   - adopt: a closed automatic breaker, or one a peer's hint guarded (a
//     failing hint, usually), opens for the hint's remaining time, capped
//     at the fallback this node would hold itself (no hint keeps a breaker
//     open past it); a half-open hint (no time left) guards.
//   - (any policy, off and confirm included, before this: an open hint
//     carrying a Retry-After deadline opens or keeps open the breaker until
//     that same moment, capped by this node's MaxRetryAfter;
//     applyRetryAfterLocked in Receive.)
//   - either: an open breaker that does not own the key's probe, hearing the
//     owner's open hint (its trip, or its probe failed), holds on for
//     another fallback period, never past the episode's bound.
func (p *Policy) applyOpenLocked(b *breakerpool.Breaker, h cluster.Hint, st *keyState, now time.Time) string {
	set := b.Settings()
	if set.HintPolicy == breakerpool.HintOff {
		return ActionRecorded
	}
	s := b.Status()
	hintGuarded := s.Mode == breakerpool.ModeGuarded && s.Source == breakerpool.SourceHint
	switch {
	case s.State == gobreaker.StateClosed && hintGuarded && set.HintPolicy == breakerpool.HintAdopt &&
		h.State == cluster.HintOpen && h.OpenFor > 0:
		b.OpenFor(min(h.OpenFor, p.fallback(set.Timeout.D())), breakerpool.SourceHint)
		return ActionAdopt
	case s.State == gobreaker.StateClosed && s.Mode == breakerpool.ModeAuto:
		if set.HintPolicy == breakerpool.HintAdopt && h.State == cluster.HintOpen && h.OpenFor > 0 {
			b.OpenFor(min(h.OpenFor, p.fallback(set.Timeout.D())), breakerpool.SourceHint)
			return ActionAdopt
		}
		b.Guard(breakerpool.SourceHint)
		if b.Status().Mode == breakerpool.ModeGuarded {
			p.met.probes.WithLabelValues(ProbeGuard).Inc()
			return ActionGuard
		}
	case s.State == gobreaker.StateOpen && h.Origin == p.probeOwnerLocked(h.Key, st) && h.Origin != p.self:
		if st.holdBound.IsZero() { // the opening is still on its way to Observe
			st.holdBound = p.holdBoundFor(now, set.Timeout.D())
		}
		if p.holdLocked(b, s.Generation, p.fallback(set.Timeout.D()), st.holdBound, now) {
			return ActionExtend
		}
	}
	return ActionRecorded
}

// applyRetryAfterLocked honours the destination's Retry-After deadline
// carried by an open hint, whatever the key's HintPolicy: it is the
// destination's own word, not a peer's suspicion, so every node holds off
// until the same moment. The wait is capped by this node's MaxRetryAfter
// (0: the feature is off here, and the hint is handled as a plain open
// hint). ok is false when the hint has no deadline, the deadline is
// already past, or the breaker is forced or already open at least that
// long; the caller then applies the ordinary policy.
func (p *Policy) applyRetryAfterLocked(b *breakerpool.Breaker, h cluster.Hint) (action string, ok bool) {
	if h.State != cluster.HintOpen || h.RetryUntil.IsZero() {
		return "", false
	}
	if _, took := b.OpenRetryAfter(h.RetryUntil, breakerpool.SourceHint); !took {
		return "", false
	}
	return ActionRetryAfter, true
}
