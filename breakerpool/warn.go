package breakerpool

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// maxWarnUntil bounds Config.WarnUntil: the count shares the streak marker
// word with the streak's number (low 8 bits).
const maxWarnUntil = 255

// maybeWarn runs after a failure reported to inst while closed (not
// guarded) that did not trip it. If the instance's consecutive failures
// reached the pool's WarnAfter and this count of this streak (counts past
// WarnUntil count as WarnUntil) has not been reported yet, it queues a
// KindFailing event. Only the failure path calls it, and only when the warning is
// enabled: the success path pays nothing.
//
// A streak is named by the breaker's success count (every success ends a
// streak and moves it); the marker is that name shifted left 8 bits plus
// the highest count reported, so "once per count per streak" is one
// CompareAndSwap. A success racing a failure of the same streak (its
// counter moved, its gobreaker reset not yet applied) can rarely cause one
// extra warning; the consumer rate-limits anyway. Concurrent failures can
// skip a count (two of them both read 2): the consumer acts on the first
// event of a streak at or above its own k.
func (b *Breaker) maybeWarn(inst *instance) {
	if b.noTrip.Load() { // forced closed or disabled: it cannot trip, so nothing to warn about
		return
	}
	failures := inst.cb.Counts().ConsecutiveFailures
	if failures < b.pool.warnAfter {
		return
	}
	mark := (b.success.Load()+1)<<8 | uint64(min(failures, b.pool.warnUntil))
	for {
		old := inst.warned.Load()
		if old>>8 == mark>>8 && old&0xff >= mark&0xff {
			return // this count of this streak (or a later one) was reported already
		}
		if inst.warned.CompareAndSwap(old, mark) {
			break
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// Under the lock, so the event is ordered with the key's transitions;
	// skip it if the breaker moved on (tripped, guarded, replaced, evicted).
	if b.flags.Load() != 0 || b.gate != gateNone || b.cur.Load() != inst || inst.trip.Load() != tripNone {
		return
	}
	b.pool.emit(Transition{
		Key: b.key, From: gobreaker.StateClosed, To: gobreaker.StateClosed, Source: SourceLocal,
		Generation: b.gen.Load(), At: time.Now(), Kind: KindFailing, Failures: failures,
	})
}
