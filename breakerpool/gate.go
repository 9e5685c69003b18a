package breakerpool

import (
	"math/rand/v2"
	"time"

	"github.com/sony/gobreaker/v2"
)

// All functions here run with b.mu held.

// setGateLocked changes the gate mode, starts a new epoch (so outstanding
// probes of the previous mode are ignored) and republishes the flags word.
func (b *Breaker) setGateLocked(g gateMode) {
	b.gate = g
	if g != gateOpen {
		b.retryUntil = time.Time{}
	}
	b.epoch++
	b.probeAdmitted, b.probeSuccess = 0, 0
	b.publishFlagsLocked()
}

func (b *Breaker) publishFlagsLocked() {
	f := b.flags.Load() & flagDead
	switch b.gate {
	case gateOpen:
		f |= flagGate | flagOpen
	case gateHalfOpen, gateGuard:
		f |= flagGate
	}
	b.flags.Store(f)
}

// advanceLocked moves an open gate whose period ended to half-open, the way
// gobreaker advances lazily on access.
func (b *Breaker) advanceLocked(now time.Duration) {
	if b.gate == gateOpen && now >= time.Duration(b.openUntil.Load()) {
		b.forcedOpen = false
		b.setGateLocked(gateHalfOpen)
		b.transitionLocked(gobreaker.StateHalfOpen, SourceLocal, 0)
	}
}

// openLocked opens the breaker until now+d, or extends the open period if
// it is already open longer... never shortening it.
func (b *Breaker) openLocked(now, d time.Duration, src Source) {
	until := now + d
	if b.gate == gateOpen {
		if cur := time.Duration(b.openUntil.Load()); cur >= until {
			return
		}
		b.openUntil.Store(int64(until))
		b.source = src
		return
	}
	b.openUntil.Store(int64(until))
	b.setGateLocked(gateOpen)
	b.transitionLocked(gobreaker.StateOpen, src, d)
}

// halfOpenLocked starts probing now (warm start).
func (b *Breaker) halfOpenLocked(src Source) {
	b.setGateLocked(gateHalfOpen)
	b.transitionLocked(gobreaker.StateHalfOpen, src, 0)
}

// closeLocked closes the breaker with a fresh gobreaker instance (new
// counts, current settings) if it was open or half-open, and lifts a guard.
func (b *Breaker) closeLocked(src Source) {
	wasOpen := b.state != gobreaker.StateClosed
	if wasOpen || b.cur.Load().trip.Load() != tripNone {
		b.cur.Store(b.newInstance(b.settings.Load()))
	}
	b.forcedOpen = false
	b.setGateLocked(gateNone)
	if wasOpen {
		b.transitionLocked(gobreaker.StateClosed, src, 0)
	}
}

// transitionLocked records an effective state change: generation, source,
// metrics, and an event for the observer (handed off without blocking).
func (b *Breaker) transitionLocked(to gobreaker.State, src Source, openFor time.Duration) {
	from := b.state
	b.state = to
	b.source = src
	gen := b.gen.Add(1)
	if from >= 0 && from <= 2 && to >= 0 && to <= 2 {
		b.transitions[from][to].Add(1)
	}
	t := Transition{
		Key: b.key, From: from, To: to, Source: src, Generation: gen, OpenFor: openFor, At: time.Now(),
		ByCheck: b.byCheck,
	}
	if to == gobreaker.StateOpen {
		t.RetryUntil = b.retryUntil
	}
	b.pool.emit(t)
}

// openTimeout is Timeout stretched by a random factor in [1, 1+jitter), drawn
// per opening, so breakers that opened together do not probe together.
func (b *Breaker) openTimeout() time.Duration {
	t := b.settings.Load().Timeout.D()
	if j := b.pool.jitter; j > 0 {
		t += time.Duration(float64(t) * j * rand.Float64())
	}
	return t
}
