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
		if t-b.lastSeen < ttl || !b.tryKill() {
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

// tryKill marks an idle, evictable breaker dead. See EvictIdle.
func (b *Breaker) tryKill() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.pool.mono())
	if b.gate != gateNone || b.forcedClosed || b.state != gobreaker.StateClosed {
		return false
	}
	inst := b.cur.Load()
	if inst.trip.Load() != tripNone || inst.cb.State() != gobreaker.StateClosed {
		return false
	}
	c := inst.cb.Counts()
	if c.Requests > c.TotalSuccesses+c.TotalFailures+c.TotalExclusions {
		return false // a call is in flight
	}
	if c.ConsecutiveFailures > 0 || (b.settings.Load().FailureRate > 0 && c.TotalFailures > 0) {
		return false
	}
	b.flags.Or(flagDead)
	if b.used.Load() {
		b.flags.And(^flagDead)
		return false
	}
	return true
}
