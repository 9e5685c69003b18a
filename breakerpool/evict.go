package breakerpool

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// EvictIdle runs one eviction sweep as of now and returns how many breakers
// it evicted. The maintenance goroutine calls it every EvictInterval; tests
// and benchmarks call it directly with a chosen now.
//
// A breaker is evicted only if it is closed in automatic mode (no gate, no
// forced state, no guard, not tripped), has no call in flight, holds no
// failure its trip policy could still use (no consecutive failures, and no
// failures in the window when FailureRate is set), and was not used for
// IdleTTL. Use is tracked with a flag each Allow/Get sets and each sweep
// clears (a CLOCK-style approximation, accurate to one EvictInterval).
//
// A breaker idle for staleFactor × IdleTTL is evicted whatever its
// automatic state — open, half-open, or holding failures — unless an
// operator forced it or a call is in flight. Without that, every key that
// failed once and then saw no traffic stayed for ever: a submitter could
// grow the pool by one breaker per made-up namespace (2,000 of 2,000 were
// still there after three idle days). A key with tasks waiting calls
// Allow at each of its turns, so it is never that idle; one that comes
// back gets a new closed breaker, which trips again after its few calls.
//
// Handshake with Allow/Get: the sweep sets flagDead then re-reads the used
// flag, while users set used then read flags; with sequentially consistent
// atomics at least one side sees the other. A user that sees flagDead
// forwards to the live entry; a sweep that sees used backs off.
func (p *Pool) EvictIdle(now time.Time) int {
	ttl := p.cfg.IdleTTL
	if ttl < 0 {
		return 0
	}
	p.sweepMu.Lock()
	defer p.sweepMu.Unlock()
	t := now.Sub(p.base)
	n := 0
	p.entries.Range(func(k Key, b *Breaker) bool {
		if b.used.Load() {
			b.used.Store(false)
			b.lastSeen = t
			return true
		}
		idle := t - b.lastSeen
		if idle < ttl || !b.tryKill(idle >= staleFactor*ttl) {
			return true
		}
		if p.compareAndDelete(k, b) {
			p.n.Add(-1)
			p.evicted.Inc()
			n++
		}
		return true
	})
	if n > 0 {
		p.rebuildRead() // let the read copy drop the evicted
	}
	return n
}

// staleFactor: a breaker idle this many IdleTTLs is evicted in any
// automatic state (EvictIdle).
const staleFactor = 24

// tryKill marks an idle, evictable breaker dead; stale allows it in any
// automatic state. See EvictIdle.
func (b *Breaker) tryKill(stale bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.pool.mono())
	if b.forcedClosed || b.forcedOpen {
		return false
	}
	inst := b.cur.Load()
	if !stale && (b.gate != gateNone || b.state != gobreaker.StateClosed || inst.trip.Load() != tripNone || inst.cb.State() != gobreaker.StateClosed) {
		return false
	}
	c := inst.cb.Counts()
	if c.Requests > c.TotalSuccesses+c.TotalFailures+c.TotalExclusions {
		return false // a call is in flight
	}
	if b.gate == gateHalfOpen && b.probeAdmitted > b.probeSuccess {
		return false // a probe is in flight
	}
	if !stale && (c.ConsecutiveFailures > 0 || (b.settings.Load().FailureRate > 0 && c.TotalFailures > 0)) {
		return false
	}
	b.flags.Or(flagDead)
	if b.used.Load() {
		b.flags.And(^flagDead)
		return false
	}
	return true
}
