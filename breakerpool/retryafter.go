package breakerpool

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// OpenRetryAfter honours a destination's Retry-After: it opens the breaker
// until until (wall clock), or extends an open period to it, then the
// breaker goes half-open as after any opening. The wait is capped at
// Settings.MaxRetryAfter (and the pool's MaxOpenFor) from now. It returns
// the deadline in force and whether it took effect.
//
// No effect (false) when: MaxRetryAfter is 0 (the feature is off for the
// key), the breaker is disabled, forced closed or forced open by an
// operator, until is not in the future, or the breaker is already open
// at least that long (an open period is never shortened; the deadline is
// still recorded for Status if it is later than the one recorded).
//
// Opening from closed, guarded or half-open is a transition (source src)
// whose event carries RetryUntil, so the hint layer can gossip the
// deadline; extending an open period is not.
func (b *Breaker) OpenRetryAfter(until time.Time, src Source) (time.Time, bool) {
	if fwd := b.lockLive(); fwd != nil {
		return fwd.OpenRetryAfter(until, src)
	}
	defer b.mu.Unlock()
	s := b.settings.Load()
	if !s.Enabled || s.MaxRetryAfter <= 0 || b.forcedClosed || b.forcedOpen {
		return time.Time{}, false
	}
	now := time.Now()
	d := until.Sub(now)
	if d <= 0 {
		return time.Time{}, false
	}
	if limit := min(s.MaxRetryAfter.D(), b.pool.maxOpenFor); d > limit {
		d = limit
		until = now.Add(d)
	}
	mono := b.pool.mono()
	if b.gate == gateOpen {
		if until.After(b.retryUntil) {
			b.retryUntil = until
		}
		if time.Duration(b.openUntil.Load()) >= mono+d {
			return until, false
		}
		b.openUntil.Store(int64(mono + d))
		b.source = src
		return until, true
	}
	b.openUntil.Store(int64(mono + d))
	b.setGateLocked(gateOpen)
	b.retryUntil = until // after setGateLocked, before the event is built
	b.transitionLocked(gobreaker.StateOpen, src, d)
	return until, true
}

// retryAfterBreaker is a breaker that can honour a Retry-After (*Breaker).
type retryAfterBreaker interface {
	OpenRetryAfter(until time.Time, src Source) (time.Time, bool)
}
