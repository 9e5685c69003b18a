package breakerpool

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// External state control, used by the gossip layer (hints) and the admin API
// (operator). Each method is a no-op where its precondition does not hold; a
// breaker that was evicted forwards the call to the pool's live entry for its
// key.

// lockLive locks b.mu unless b was evicted; then it returns the live breaker
// for the key (created if need be) to forward the call to.
func (b *Breaker) lockLive() (fwd *Breaker) {
	b.mu.Lock()
	if b.flags.Load()&flagDead != 0 {
		b.mu.Unlock()
		return b.pool.Get(b.key)
	}
	b.advanceLocked(b.pool.mono())
	return nil
}

// OpenFor opens the breaker now, or extends its open period, until now+d;
// then it behaves as half-open (admits MaxRequests probes). It never
// shortens an open period. d is capped at the pool's MaxOpenFor; d <= 0 is
// ignored. It has no effect on a disabled breaker, and on a forced-closed
// breaker only an operator can open it (which clears the forced mode).
func (b *Breaker) OpenFor(d time.Duration, src Source) {
	if fwd := b.lockLive(); fwd != nil {
		fwd.OpenFor(d, src)
		return
	}
	defer b.mu.Unlock()
	if d <= 0 || !b.settings.Load().Enabled {
		return
	}
	if b.forcedClosed {
		if src != SourceOperator {
			return
		}
		b.forcedClosed = false
		b.noTrip.Store(false)
	}
	if maxD := b.pool.maxOpenFor; d > maxD {
		d = maxD
	}
	b.openLocked(b.pool.mono(), d, src)
	if src == SourceOperator {
		b.forcedOpen = true
	}
}

// ProbeNow warm-starts an open breaker: it becomes half-open at once and
// admits MaxRequests probes; MaxRequests successes close it, a failure
// reopens it for Timeout. No-op unless the breaker is open.
func (b *Breaker) ProbeNow(src Source) {
	if fwd := b.lockLive(); fwd != nil {
		fwd.ProbeNow(src)
		return
	}
	defer b.mu.Unlock()
	if b.gate == gateOpen && (!b.forcedOpen || src == SourceOperator) {
		b.forcedOpen = false
		b.halfOpenLocked(src)
	}
}

// Guard makes a closed breaker admit only MaxRequests probe calls until one
// resolves: a failure opens it for Timeout, a success lifts the guard. The
// rest are rejected. No-op unless the breaker is closed in automatic mode
// (not forced closed, not disabled, not already guarded). The breaker stays
// closed, so Guard is not a transition; Status reports ModeGuarded.
func (b *Breaker) Guard(src Source) {
	if fwd := b.lockLive(); fwd != nil {
		fwd.Guard(src)
		return
	}
	defer b.mu.Unlock()
	if b.gate != gateNone || b.forcedClosed || !b.settings.Load().Enabled ||
		b.cur.Load().trip.Load() != tripNone {
		return
	}
	b.setGateLocked(gateGuard)
	b.source = src
}

// ForceClosed admits every call (still counted) and keeps the breaker from
// tripping until Auto. An open or half-open breaker closes at once with fresh
// counts.
func (b *Breaker) ForceClosed(src Source) {
	if fwd := b.lockLive(); fwd != nil {
		fwd.ForceClosed(src)
		return
	}
	defer b.mu.Unlock()
	b.forcedClosed = true
	b.noTrip.Store(true)
	b.closeLocked(src)
	b.source = src
}

// Auto clears any forced mode. A forced-closed breaker resumes counting from
// where it is (it may trip on its next failure); a breaker an operator opened
// warm-starts a probe (half-open) instead of waiting out the forced period.
// Opens from local failures or peers' hints are automatic already and are
// left alone.
func (b *Breaker) Auto(src Source) {
	if fwd := b.lockLive(); fwd != nil {
		fwd.Auto(src)
		return
	}
	defer b.mu.Unlock()
	if b.forcedClosed {
		b.forcedClosed = false
		b.noTrip.Store(!b.settings.Load().Enabled)
		b.source = src
	}
	if b.forcedOpen {
		b.forcedOpen = false
		if b.gate == gateOpen {
			b.halfOpenLocked(src)
		}
	}
}

// applySettings installs new settings. Identical settings are a no-op. An
// open breaker keeps its open deadline (the new Timeout applies to the next
// opening); a change of Interval or BucketPeriod rebuilds the counting
// instance (closed-state counts restart); disabling closes the breaker.
func (b *Breaker) applySettings(s Settings) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flags.Load()&flagDead != 0 {
		return // evicted; a live entry resolves its own settings
	}
	b.advanceLocked(b.pool.mono())
	old := b.settings.Load()
	if *old == s {
		return
	}
	ps := b.pool.intern(s)
	b.settings.Store(ps)
	if !s.Enabled {
		b.noTrip.Store(true)
		if b.gate != gateNone || b.state != gobreaker.StateClosed {
			b.closeLocked(SourceOperator)
		} else if b.cur.Load().trip.Load() != tripNone {
			b.cur.Store(b.newInstance(ps))
		}
	} else {
		b.noTrip.Store(b.forcedClosed)
	}
	if s.Interval != old.Interval || s.BucketPeriod != old.BucketPeriod {
		if inst := b.cur.Load(); inst.interval != s.Interval || inst.bucket != s.BucketPeriod {
			b.cur.Store(b.newInstance(ps))
		}
	}
}
