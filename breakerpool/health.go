package breakerpool

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// SourceHealth: an active health check of the destination (the healthprobe
// package) moved the breaker, e.g. a passed health check made an open
// breaker half-open.
const SourceHealth Source = "health"

// Controls for an active health check. While a key has a health check, the
// checker keeps the breaker open by renewing a lease (ExtendOpen) instead of
// letting its open period end in a half-open probe with a real task; when
// the check passes it warm-starts the breaker (ProbeNow(SourceHealth)). The
// lease is what keeps this from ever sticking: a checker that stops renewing
// leaves the breaker to its own open timer. SettleHalfOpen ends a half-open
// state that no real call resolved.

// ExtendOpen extends the open period of an automatic open breaker to now+d
// (never shortening it, capped at the pool's MaxOpenFor) and reports whether
// the breaker is open afterwards. Unlike OpenFor it never opens a breaker:
// one that is closed, half-open, guarded, forced open by an operator or
// disabled is left alone (false). The source is not changed.
func (b *Breaker) ExtendOpen(d time.Duration) bool {
	if fwd := b.lockLive(); fwd != nil {
		return fwd.ExtendOpen(d)
	}
	defer b.mu.Unlock()
	if b.gate != gateOpen || b.forcedOpen || !b.settings.Load().Enabled || d <= 0 {
		return false
	}
	if maxD := b.pool.maxOpenFor; d > maxD {
		d = maxD
	}
	until := b.pool.mono() + d
	if time.Duration(b.openUntil.Load()) < until {
		b.openUntil.Store(int64(until))
	}
	return true
}

// FailedCheck is a probe that failed without a real call: an open
// automatic breaker goes half-open and straight back to open for reopenFor
// (its Timeout when ≤ 0), under one lock, so no call is admitted between
// the two. Both transitions are observed like a real probe's (the second,
// half-open → open of source local, is what the gossip layer publishes as
// "probe failed"). The confirm hint policy's designated peer uses it when
// the key has a health check (healthprobe). Reports whether it acted.
func (b *Breaker) FailedCheck(reopenFor time.Duration) bool {
	if fwd := b.lockLive(); fwd != nil {
		return fwd.FailedCheck(reopenFor)
	}
	defer b.mu.Unlock()
	if b.gate != gateOpen || b.forcedOpen || !b.settings.Load().Enabled {
		return false
	}
	b.byCheck = true
	b.halfOpenLocked(SourceHealth)
	b.reopenLocked(reopenFor)
	b.byCheck = false
	return true
}

// SettleHalfOpen decides a half-open breaker by a health check instead of a
// real call: healthy closes it (fresh counts), otherwise it reopens for
// reopenFor. Both are transitions of source local, as a probe result is (so
// the gossip layer publishes them). It acts only if the breaker is still
// half-open at generation gen and automatic; a probe admitted before is
// ignored when it resolves (new epoch). Reports whether it acted.
func (b *Breaker) SettleHalfOpen(gen uint64, healthy bool, reopenFor time.Duration) bool {
	if fwd := b.lockLive(); fwd != nil {
		return fwd.SettleHalfOpen(gen, healthy, reopenFor)
	}
	defer b.mu.Unlock()
	if b.gate != gateHalfOpen || b.state != gobreaker.StateHalfOpen || b.gen.Load() != gen ||
		b.forcedClosed || !b.settings.Load().Enabled {
		return false
	}
	b.byCheck = true
	if healthy {
		b.closeLocked(SourceLocal)
	} else {
		b.reopenLocked(reopenFor)
	}
	b.byCheck = false
	return true
}

// reopenLocked opens the breaker again after a probe without a call failed:
// for reopenFor (its Timeout when ≤ 0, capped at the pool's MaxOpenFor), of
// source local, as a failed probe's reopening is. b.mu held.
func (b *Breaker) reopenLocked(reopenFor time.Duration) {
	if reopenFor <= 0 {
		reopenFor = b.openTimeout()
	}
	if maxD := b.pool.maxOpenFor; reopenFor > maxD {
		reopenFor = maxD
	}
	b.openLocked(b.pool.mono(), reopenFor, SourceLocal)
}
