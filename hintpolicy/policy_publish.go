package hintpolicy

import (
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// maxOpenHints bounds one anti-entropy answer (the transport also caps the
// encoded batch at 256 KiB).
const maxOpenHints = 4096

// Observe receives every breaker transition of this node's pool (set it as,
// or forward to it from, breakerpool.Config.Observer) and the pool's early
// warnings (breakerpool.Config.OnFailing; see observeFailing). It runs on the
// pool's observer goroutine and never blocks.
//
// Local transitions (source local) are published: open with the remaining
// open time, closed; half-open is not (peers learn the probe's result).
// Transitions caused by hints are never re-published (the fleet would echo),
// nor are operator ones (Raft carries them to every node). Every opening
// starts an open episode: a node that does not own the key's probe holds its
// breaker open until its fallback deadline, waiting for the owner's result.
func (p *Policy) Observe(t breakerpool.Transition) {
	if !p.running.Load() {
		return
	}
	if t.Kind == breakerpool.KindFailing {
		p.observeFailing(t)
		return
	}
	now := time.Now()
	b, ok := p.pool.Lookup(t.Key)
	var delegating bool
	defer func() { // registered before the unlock's defer: runs after it
		if delegating && p.cfg.OnDelegate != nil {
			p.cfg.OnDelegate(t.Key)
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.keyLocked(t.Key, now)
	st.local = t.To
	if ok && b.Settings().HintPolicy == breakerpool.HintConfirm {
		p.confirmObserveLocked(t, st, b.Settings().Timeout.D(), now)
	}
	delegating = p.delegateObserveLocked(t, st, now)
	switch t.To {
	case gobreaker.StateOpen:
		if t.Source == breakerpool.SourceLocal {
			st.addTripper(p.self)
			if t.From == gobreaker.StateClosed {
				p.susp.record(t.Key, now)
				p.evaluateSuspicionLocked(now)
			}
		}
		if ok {
			timeout := b.Settings().Timeout.D()
			if t.From != gobreaker.StateOpen || st.holdBound.IsZero() {
				st.holdBound = p.holdBoundFor(now, timeout)
			}
			// Held for the probe owner, if another node with calls for
			// the key owns it; else this node probes at its Timeout. An
			// owner heard from later (its open hint) extends the hold
			// (applyOpenLocked).
			if o := p.probeOwnerLocked(t.Key, st); b.Settings().HintPolicy != breakerpool.HintOff && o != "" && o != p.self {
				p.holdLocked(b, t.Generation, p.fallback(timeout), st.holdBound, now)
			}
		}
		if t.Source == breakerpool.SourceLocal {
			p.publishLocked(st, t, now)
		}
	case gobreaker.StateHalfOpen:
		if st.confirmProbe && t.Source == breakerpool.SourceHint {
			st.confirmProbe = false // counted as ProbeConfirm when asked (askLocked)
			break
		}
		p.met.probes.WithLabelValues(p.probeRole(t, ok, b, st)).Inc()
	case gobreaker.StateClosed:
		st.holdBound = time.Time{}
		st.trippers = nil // the episode is over here
		if st.pubState == cluster.HintOpen {
			st.pubState = cluster.HintClosed // an operator or hint close: no longer ours to advertise
		}
		if t.Source == breakerpool.SourceLocal {
			p.publishLocked(st, t, now)
		}
	}
}

// probeRole names why a breaker went half-open.
func (p *Policy) probeRole(t breakerpool.Transition, ok bool, b *breakerpool.Breaker, st *keyState) string {
	switch {
	case t.Source == breakerpool.SourceHint:
		return ProbeWarm
	case !ok || b.Settings().HintPolicy == breakerpool.HintOff:
		return ProbeLocal
	case p.probeOwnerLocked(t.Key, st) == p.self:
		return ProbeOwner
	default:
		return ProbeFallback
	}
}

// holdLocked keeps an open breaker open for d more (never past bound), as
// long as it is still in the open state of generation gen: a breaker that
// moved on (half-open, closed) in the meantime is left alone, so a hold
// never reopens a breaker. Operator-forced opens are not touched, nor
// openings held by a destination's Retry-After: every node resumes at that
// deadline, the destination's own word. Held like a trip (Timeout × [2,
// 2.5)), they waited for the probe owner's closed hint, and an owner with
// no traffic for the key sends none: a 1 s Retry-After kept the other
// nodes off for 120–150 s at the default Timeout (the hint review).
func (p *Policy) holdLocked(b *breakerpool.Breaker, gen uint64, d time.Duration, bound, now time.Time) bool {
	if rest := bound.Sub(now); d > rest {
		d = rest
	}
	if d <= 0 {
		return false
	}
	s := b.Status()
	if s.State != gobreaker.StateOpen || s.Generation != gen || s.Mode == breakerpool.ModeForcedOpen || s.OpenRemaining >= d ||
		s.RetryAfterUntil != nil {
		return false
	}
	// The window between Status and OpenFor is a few instructions; a
	// breaker whose open period ends inside it would be reopened for d,
	// which is still bounded by bound.
	b.OpenFor(d, s.Source)
	return true
}

// publishLocked announces a local transition with the next Lamport
// generation of its key. Open hints are withheld while this node suspects
// its own egress.
func (p *Policy) publishLocked(st *keyState, t breakerpool.Transition, now time.Time) {
	h := cluster.Hint{Key: t.Key, State: cluster.HintClosed, Suspect: p.suspectOn.Load()}
	switch {
	case t.To == gobreaker.StateOpen && t.From == gobreaker.StateHalfOpen:
		h.State, h.Reason = cluster.HintOpen, "probe failed"
	case t.To == gobreaker.StateOpen:
		h.State, h.Reason = cluster.HintOpen, "tripped"
	default:
		h.Reason = "probe succeeded"
	}
	if h.State == cluster.HintOpen {
		if h.Suspect {
			p.met.published.WithLabelValues(PublishSuppressedSuspect).Inc()
			return
		}
		h.OpenFor = max(0, min(t.OpenFor-now.Sub(t.At), cluster.MaxHintOpenFor))
		if ru := t.RetryUntil; !ru.IsZero() && ru.After(now) {
			// The destination's own deadline: every peer holds off until
			// this same moment (ms precision on the wire).
			h.RetryUntil = ru.Truncate(time.Millisecond)
			h.Reason = "retry-after (" + h.Reason + ")"
		}
	}
	st.clock = nextGeneration(st, now)
	h.Generation = st.clock
	st.lastOrigin = p.self
	if err := p.members.Publish(h); err != nil {
		p.met.published.WithLabelValues(PublishError).Inc()
		p.log.Debug("hint not published", "key", t.Key.String(), "err", err)
		return
	}
	p.met.publishDelay.Observe(time.Since(t.At).Seconds())
	switch {
	case !h.RetryUntil.IsZero():
		p.met.published.WithLabelValues(PublishRetryAfter).Inc()
	case h.State == cluster.HintOpen:
		p.met.published.WithLabelValues(PublishOpen).Inc()
	default:
		p.met.published.WithLabelValues(PublishClosed).Inc()
	}
	st.published, st.pubState, st.pubGen, st.pubReason = true, h.State, h.Generation, h.Reason
	st.pubRetry = h.RetryUntil
	st.pubUntil = now.Add(h.OpenFor)
}

// OpenHints lists this node's own latest hint for every key it published
// open and whose breaker is still not closed, for push/pull anti-entropy.
// Nothing while this node suspects itself.
func (p *Policy) OpenHints() []cluster.Hint {
	if !p.running.Load() || p.suspectOn.Load() {
		return nil
	}
	now := time.Now()
	var out []cluster.Hint
	p.mu.Lock()
	for k, st := range p.keys {
		if st.published && st.pubState == cluster.HintOpen && len(out) < maxOpenHints {
			out = append(out, cluster.Hint{Key: k, State: cluster.HintOpen, Generation: st.pubGen, Origin: p.self,
				OpenFor: st.pubUntil.Sub(now), Reason: st.pubReason, RetryUntil: st.pubRetry})
		}
	}
	p.mu.Unlock()
	live := out[:0]
	for _, h := range out {
		b, ok := p.pool.Lookup(h.Key)
		if !ok {
			continue
		}
		switch b.State() {
		case gobreaker.StateClosed:
			continue // closed by an operator or a hint-driven probe since
		case gobreaker.StateHalfOpen:
			h.State, h.OpenFor = cluster.HintHalfOpen, 0
		}
		if h.OpenFor <= 0 {
			h.State, h.OpenFor = cluster.HintHalfOpen, 0
		}
		if h.State != cluster.HintOpen || !h.RetryUntil.After(now) {
			h.RetryUntil = time.Time{} // only an open hint carries a deadline still ahead
		}
		live = append(live, h)
	}
	return live
}
