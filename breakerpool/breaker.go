package breakerpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Bits of Breaker.flags, the word the hot path loads.
const (
	flagGate uint32 = 1 << iota // a gate mode (open, half-open, guarded) is active
	flagOpen                    // the gate is open until openUntil
	flagDead                    // evicted: forward every call to the pool's live entry
)

// gateMode is the externally visible state machine in front of gobreaker.
type gateMode uint8

const (
	gateNone     gateMode = iota // closed: gobreaker counts and decides
	gateOpen                     // open until openUntil, then half-open
	gateHalfOpen                 // admit MaxRequests probes
	gateGuard                    // closed, but only MaxRequests probes until one resolves
)

// Breaker is one circuit breaker of the pool. gobreaker does the
// closed-state counting and trip decision; a small gate in front of it owns
// open and half-open (local trips, timeouts with jitter, probes) and the
// externally driven modes. See DESIGN.md.
type Breaker struct {
	// The words of the fast path share one cache line: the ones read on
	// every call and the counters, one of which every call adds to. The
	// counters had a line of their own, to keep their writes from evicting
	// the read words from other cores; but one key called from several
	// cores bounces a line per call either way (then the counter line, now
	// this one), and with many keys the separate line was one more cache
	// miss per call: BenchmarkPoolVsRaw at 10,000 keys went from 1.5× raw
	// gobreaker to 1.0–1.1× with it here, one key unchanged
	// (docs/architecture.md, "Issue 17 §3").
	flags    atomic.Uint32
	used     atomic.Bool // set on use, cleared by the eviction sweep
	noTrip   atomic.Bool // forced closed or disabled
	cur      atomic.Pointer[instance]
	success  atomic.Uint64
	failure  atomic.Uint64
	rejected atomic.Uint64
	_        [24]byte

	openUntil atomic.Int64 // pool-monotonic ns; meaningful while flagOpen
	settings  atomic.Pointer[Settings]
	gen       atomic.Uint64

	// Metric counters, exported by the pool's collector.
	blocked     atomic.Uint64
	transitions [3][3]atomic.Uint64

	key  Key
	pool *Pool

	mu           sync.Mutex // guards the fields below; never held across a gobreaker call that can call back
	gate         gateMode
	forcedClosed bool
	// forcedOpen: an operator's OpenFor holds the gate open; peers' hints
	// cannot warm-start it, only Auto (or the end of its period) ends it.
	forcedOpen    bool
	state         gobreaker.State // recorded effective state (last transition)
	source        Source
	epoch         uint64 // bumps on every gate change; stale probe results are ignored
	probeAdmitted uint32
	probeSuccess  uint32
	// retryUntil is the Retry-After deadline holding the gate open (wall
	// clock); zero unless the gate is open because of one.
	retryUntil time.Time
	// byCheck is set while a health check decides the breaker's state
	// without a call (FailedCheck, SettleHalfOpen): the transitions
	// recorded meanwhile carry Transition.ByCheck.
	byCheck bool

	lastSeen time.Duration // eviction sweep only (under Pool.sweepMu)
}

// newBreaker builds a breaker; s is shared and never mutated.
func newBreaker(p *Pool, k Key, s *Settings) *Breaker {
	b := &Breaker{key: k, pool: p, source: SourceLocal}
	b.settings.Store(s)
	b.noTrip.Store(!s.Enabled)
	b.cur.Store(b.newInstance(s))
	b.lastSeen = p.mono()
	return b
}

// Key returns the breaker's key.
func (b *Breaker) Key() Key { return b.key }

// Name returns the key as "taskGroup/namespace/destination".
func (b *Breaker) Name() string { return b.key.String() }

// Settings returns the breaker's current settings.
func (b *Breaker) Settings() Settings { return *b.settings.Load() }

// Generation increases on every effective state transition.
func (b *Breaker) Generation() uint64 { return b.gen.Load() }

func (b *Breaker) touch() {
	if !b.used.Load() {
		b.used.Store(true)
	}
}

// Allow asks for permission to make one call. On success the caller must
// call done exactly once with the outcome. A rejection is a
// *ResourceExhaustedError with cause CIRCUIT_BREAKER_OPEN wrapping
// gobreaker.ErrOpenState or gobreaker.ErrTooManyRequests.
func (b *Breaker) Allow() (done func(success bool), err error) {
	b.touch() // must precede the flags load (eviction handshake, see evict.go)
	if b.flags.Load() == 0 {
		inst := b.cur.Load()
		gbDone, d, err := b.admitFast(inst)
		if err != nil {
			b.rejected.Add(1)
			return nil, rejectErr(err)
		}
		if d != nil && d.done != nil {
			return d.done, nil
		}
		done := func(ok bool) { b.finishFast(gbDone, verdictOf(ok)) }
		if d != nil {
			nd := *d
			nd.done = done
			inst.dones.Store(&nd)
		}
		return done, nil
	}
	finish, err := b.allowSlow()
	if err != nil {
		return nil, err
	}
	return func(ok bool) { finish(verdictOf(ok)) }, nil
}

// Verdict is what a finished call says about the destination.
type Verdict uint8

const (
	// VerdictFailure: the destination is down (a DestinationDownError).
	VerdictFailure Verdict = iota
	// VerdictSuccess: the destination answered.
	VerdictSuccess
	// VerdictNone: the caller abandoned the call (its shard moved, the node
	// is closing) before the destination answered. The permit is given back
	// and nothing is counted, so an abandoned half-open probe neither closes
	// nor reopens the breaker.
	VerdictNone
)

func verdictOf(ok bool) Verdict {
	if ok {
		return VerdictSuccess
	}
	return VerdictFailure
}

// AllowVerdict is Allow for callers that can abandon a call: done takes a
// Verdict, and VerdictNone gives the permit back without a verdict.
// CircuitBreakerExecutable uses it when the executable's context was
// cancelled.
func (b *Breaker) AllowVerdict() (done func(Verdict), err error) {
	b.touch() // must precede the flags load (eviction handshake, see evict.go)
	if b.flags.Load() == 0 {
		inst := b.cur.Load()
		gbDone, d, err := b.admitFast(inst)
		if err != nil {
			b.rejected.Add(1)
			return nil, rejectErr(err)
		}
		if d != nil && d.doneV != nil {
			return d.doneV, nil
		}
		done := func(v Verdict) { b.finishFast(gbDone, v) }
		if d != nil {
			nd := *d
			nd.doneV = done
			inst.dones.Store(&nd)
		}
		return done, nil
	}
	return b.allowSlow()
}

// finishFast reports a call admitted on the fast path. If the current
// instance tripped, the caller that wins the flag opens the gate; a trip of
// an instance that was replaced meanwhile is moot.
func (b *Breaker) finishFast(gbDone func(error), v Verdict) {
	switch v {
	case VerdictSuccess:
		b.success.Add(1)
		gbDone(nil)
		return // a success never trips
	case VerdictNone:
		gbDone(errAbandoned)
		return
	}
	b.failure.Add(1)
	gbDone(errFailure)
	inst := b.cur.Load()
	if inst.trip.Load() == tripNone {
		if b.pool.warnAfter != 0 {
			b.maybeWarn(inst)
		}
		return
	}
	if inst.trip.Load() == tripPending && inst.trip.CompareAndSwap(tripPending, tripHandled) {
		b.mu.Lock()
		defer b.mu.Unlock()
		now := b.pool.mono()
		b.advanceLocked(now)
		if b.cur.Load() == inst && (b.gate == gateNone || b.gate == gateGuard) && !b.noTrip.Load() {
			b.openLocked(now, b.openTimeout(), SourceLocal)
		}
	}
}

func (b *Breaker) allowClosed(inst *instance, epoch uint64, guarded bool) (func(Verdict), error) {
	gbDone, err := inst.cb.Allow()
	if err != nil {
		b.rejected.Add(1)
		return nil, rejectErr(err)
	}
	return func(v Verdict) { b.finishClosed(inst, gbDone, v, epoch, guarded) }, nil
}

// OpenRemaining is how long the breaker stays open before it admits a
// probe; zero unless it is open. Lock-free: the queue asks it for every
// task an open breaker rejects.
func (b *Breaker) OpenRemaining() time.Duration {
	if b.flags.Load()&flagOpen == 0 {
		return 0
	}
	return max(0, time.Duration(b.openUntil.Load())-b.pool.mono())
}

func (b *Breaker) allowSlow() (func(Verdict), error) {
	p := b.pool
	f := b.flags.Load()
	if f&flagDead != 0 {
		return p.Get(b.key).AllowVerdict()
	}
	if f&flagOpen != 0 && p.mono() < time.Duration(b.openUntil.Load()) {
		b.rejected.Add(1)
		return nil, errRejectOpen
	}
	b.mu.Lock()
	if b.flags.Load()&flagDead != 0 {
		b.mu.Unlock()
		return p.Get(b.key).AllowVerdict()
	}
	b.advanceLocked(p.mono())
	switch b.gate {
	case gateOpen:
		b.mu.Unlock()
		b.rejected.Add(1)
		return nil, errRejectOpen
	case gateHalfOpen, gateGuard:
		if b.probeAdmitted >= b.settings.Load().MaxRequests {
			b.mu.Unlock()
			b.rejected.Add(1)
			return nil, errRejectTooMany
		}
		b.probeAdmitted++
		epoch, gate, inst := b.epoch, b.gate, b.cur.Load()
		b.mu.Unlock()
		if gate == gateGuard {
			return b.allowClosed(inst, epoch, true)
		}
		return func(v Verdict) { b.finishProbe(epoch, v) }, nil
	default:
		inst := b.cur.Load()
		b.mu.Unlock()
		return b.allowClosed(inst, 0, false)
	}
}

// finishClosed reports a call admitted while closed (or guarded) to
// gobreaker, then hands a trip or a guard outcome to the gate.
func (b *Breaker) finishClosed(inst *instance, gbDone func(error), v Verdict, epoch uint64, guarded bool) {
	if v == VerdictNone {
		gbDone(errAbandoned)
		if guarded {
			b.returnProbe(gateGuard, epoch)
		}
		return
	}
	ok := v == VerdictSuccess
	if ok {
		b.success.Add(1)
		gbDone(nil)
	} else {
		b.failure.Add(1)
		gbDone(errFailure)
	}
	tripped := inst.trip.Load() == tripPending && inst.trip.CompareAndSwap(tripPending, tripHandled)
	if !tripped && !guarded {
		if !ok && b.pool.warnAfter != 0 {
			b.maybeWarn(inst)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.pool.mono()
	b.advanceLocked(now)
	switch {
	case guarded && b.gate == gateGuard && b.epoch == epoch:
		if ok && !tripped {
			b.setGateLocked(gateNone) // the guard is lifted; no state change
			return
		}
		b.openLocked(now, b.openTimeout(), SourceLocal)
	case tripped && b.cur.Load() == inst && b.gate == gateNone && !b.noTrip.Load():
		b.openLocked(now, b.openTimeout(), SourceLocal)
	case tripped && b.cur.Load() == inst && b.gate == gateGuard:
		b.openLocked(now, b.openTimeout(), SourceLocal)
	}
}

// finishProbe reports a half-open probe's outcome.
func (b *Breaker) finishProbe(epoch uint64, v Verdict) {
	if v == VerdictNone {
		b.returnProbe(gateHalfOpen, epoch)
		return
	}
	ok := v == VerdictSuccess
	if ok {
		b.success.Add(1)
	} else {
		b.failure.Add(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.pool.mono()
	b.advanceLocked(now)
	if b.gate != gateHalfOpen || b.epoch != epoch {
		return // a result from an earlier generation
	}
	if !ok {
		b.openLocked(now, b.openTimeout(), SourceLocal)
		return
	}
	b.probeSuccess++
	if b.probeSuccess >= b.settings.Load().MaxRequests {
		b.closeLocked(SourceLocal)
	}
}

// returnProbe gives an abandoned probe's permit back, if the gate it was
// admitted by is still the one in force: another probe may go instead.
func (b *Breaker) returnProbe(gate gateMode, epoch uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.pool.mono())
	if b.gate == gate && b.epoch == epoch && b.probeAdmitted > 0 {
		b.probeAdmitted--
	}
}

// State returns the effective state, including external modes.
func (b *Breaker) State() gobreaker.State {
	if b.flags.Load()&flagGate == 0 {
		if b.cur.Load().trip.Load() == tripPending {
			return gobreaker.StateOpen // tripped; the gate is about to open
		}
		return gobreaker.StateClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.pool.mono())
	return b.state
}

// Counts returns the current generation's counts: gobreaker's while closed
// (for the window in force now: an Interval that ended with no call reads as
// a new, empty window, as gobreaker's State sees it), the probes' while
// half-open, zero while open.
func (b *Breaker) Counts() gobreaker.Counts {
	if b.flags.Load()&flagGate == 0 {
		inst := b.cur.Load()
		if inst.interval != 0 {
			return inst.windowCounts()
		}
		return inst.cb.Counts()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.pool.mono())
	return b.countsLocked()
}

func (b *Breaker) countsLocked() gobreaker.Counts {
	switch b.gate {
	case gateOpen:
		return gobreaker.Counts{}
	case gateHalfOpen:
		return gobreaker.Counts{Requests: b.probeAdmitted, TotalSuccesses: b.probeSuccess, ConsecutiveSuccesses: b.probeSuccess}
	default:
		inst := b.cur.Load()
		if inst.interval != 0 {
			return inst.windowCounts()
		}
		return inst.cb.Counts()
	}
}

// Status returns a snapshot of the breaker.
func (b *Breaker) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.pool.mono()
	b.advanceLocked(now)
	st := Status{
		Key:        b.key,
		State:      b.state,
		Counts:     b.countsLocked(),
		Generation: b.gen.Load(),
		Source:     b.source,
		Mode:       b.modeLocked(),
		Settings:   *b.settings.Load(),
	}
	if b.gate == gateNone && b.cur.Load().trip.Load() == tripPending {
		st.State = gobreaker.StateOpen
	}
	if b.gate == gateOpen {
		st.OpenRemaining = time.Duration(b.openUntil.Load()) - now
		if !b.retryUntil.IsZero() {
			ru := b.retryUntil
			st.RetryAfterUntil = &ru
		}
	}
	return st
}

func (b *Breaker) modeLocked() Mode {
	switch {
	case !b.settings.Load().Enabled:
		return ModeDisabled
	case b.forcedClosed:
		return ModeForcedClosed
	case b.gate == gateGuard:
		return ModeGuarded
	case b.gate == gateOpen && b.forcedOpen:
		return ModeForcedOpen
	}
	return ModeAuto
}

// waitUnlocked yields; used while an eviction handshake is in progress.
func waitUnlocked() { runtime.Gosched() }
