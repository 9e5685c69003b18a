package hintpolicy

import (
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// The early warning. A destination that dies for every node at the same
// moment makes every node reach its own FailureThreshold within a few
// calls of the others, before any "open" hint exists. So a node whose
// closed breaker sees the pool's WarnAfter consecutive failures (a
// breakerpool KindFailing event) publishes a "failing" hint, and peers under
// probe/adopt guard the key: each admits one probe call until it resolves,
// a failure opens it (and publishes "open"). See DESIGN.md, "Early warning".

// observeFailing publishes a local failure streak as a failing hint: only
// while the breaker is still closed, automatic and unguarded (a streak the
// fleet already heard about through a peer's hint, or one that has tripped
// since, is not news), never while this node suspects its own egress, and
// at most once per Timeout per key.
func (p *Policy) observeFailing(t breakerpool.Transition) {
	b, ok := p.pool.Lookup(t.Key)
	if !ok {
		return
	}
	s := b.Status()
	if s.Settings.HintPolicy != breakerpool.HintConfirm && t.Failures < uint32(p.cfg.WarnAfter) {
		return // confirm's first-failure report; probe and adopt wait for k
	}
	if s.State != gobreaker.StateClosed || s.Mode != breakerpool.ModeAuto {
		// Handled after the breaker tripped (the calls outran the event
		// stream) or was guarded or forced: its own hint covers it.
		p.met.published.WithLabelValues(PublishFailingMoot).Inc()
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.keyLocked(t.Key, now)
	if p.suspectOn.Load() {
		p.met.published.WithLabelValues(PublishFailingSuppressedSuspect).Inc()
		return
	}
	if !st.failingPub.IsZero() && now.Sub(st.failingPub) < s.Settings.Timeout.D() {
		p.met.published.WithLabelValues(PublishFailingRateLimited).Inc()
		return
	}
	h := cluster.Hint{Key: t.Key, State: cluster.HintFailing, Generation: nextGeneration(st, now),
		Reason: fmt.Sprintf("%d consecutive failures", t.Failures)}
	if err := p.members.Publish(h); err != nil {
		p.met.published.WithLabelValues(PublishError).Inc()
		p.log.Debug("failing hint not published", "key", t.Key.String(), "err", err)
		return
	}
	st.clock, st.lastOrigin, st.failingPub = h.Generation, p.self, now
	p.met.publishDelay.Observe(time.Since(t.At).Seconds())
	p.met.published.WithLabelValues(PublishFailing).Inc()
}

// applyFailingLocked applies a peer's failing hint to b and names the
// action taken. Under probe and adopt a closed automatic breaker is guarded
// (admits MaxRequests probes until one resolves: a failure opens it, a
// success lifts the guard), whatever its own failure count: a node already
// failing for the key stops at its next failure instead of at its
// threshold. A failing hint never opens a breaker (it carries no open
// time) and never extends a hold. Under off it is recorded.
func (p *Policy) applyFailingLocked(b *breakerpool.Breaker) string {
	if b.Settings().HintPolicy == breakerpool.HintOff {
		return ActionRecorded
	}
	if s := b.Status(); s.State != gobreaker.StateClosed || s.Mode != breakerpool.ModeAuto {
		return ActionRecorded
	}
	b.Guard(breakerpool.SourceHint)
	if b.Status().Mode != breakerpool.ModeGuarded {
		return ActionRecorded // it tripped or was forced in between
	}
	p.met.probes.WithLabelValues(ProbeGuard).Inc()
	return ActionGuardFailing
}
