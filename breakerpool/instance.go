package breakerpool

import (
	"errors"
	"sync/atomic"

	"github.com/sony/gobreaker/v2"
)

// errFailure is what done(false) reports to gobreaker.
var errFailure = errors.New("destination down")

// errAbandoned is what an abandoned call (VerdictNone) reports to gobreaker:
// excluded from its counts, so it is neither a success nor a failure.
var errAbandoned = errors.New("call abandoned without a verdict")

func isAbandoned(err error) bool { return err == errAbandoned }

// Rejection errors. They are preallocated so that rejecting costs no
// allocation; both match ErrCircuitBreakerOpen and the gobreaker error.
var (
	errRejectOpen = &ResourceExhaustedError{
		Cause: CauseCircuitBreakerOpen, Message: "circuit breaker rejection", Err: gobreaker.ErrOpenState,
	}
	errRejectTooMany = &ResourceExhaustedError{
		Cause: CauseCircuitBreakerOpen, Message: "circuit breaker rejection", Err: gobreaker.ErrTooManyRequests,
	}
)

func rejectErr(err error) error {
	if errors.Is(err, gobreaker.ErrTooManyRequests) {
		return errRejectTooMany
	}
	return errRejectOpen
}

// Trip flags of an instance.
const (
	tripNone uint32 = iota
	tripPending
	tripHandled
)

// instance is one gobreaker that does the closed-state counting and trip
// decision. It is replaced (never reset) when the breaker closes after being
// open, or when the window settings change; late done calls reach the old
// instance, which ignores them or trips harmlessly.
type instance struct {
	cb gobreaker.TwoStepCircuitBreaker[struct{}] // by value: one pointer hop less on the hot path
	// trip is set by OnStateChange (under gobreaker's lock) when the
	// instance opens; the done path that sees it hands the trip to the gate.
	trip atomic.Uint32
	// warned marks the failure streak a KindFailing event was emitted for:
	// the breaker's success count at the time, plus one (0: never), shifted
	// left 8 bits, plus the highest failure count reported for it. A
	// success ends a streak and moves the count, so the next streak can
	// warn again; a new instance starts unmarked.
	warned atomic.Uint64
	// window settings the instance was built with.
	interval, bucket Duration

	// reuse: the done functions of one generation can be shared (see
	// admitFast). changes counts gobreaker's state changes; dones holds
	// the functions built for the last generation seen.
	reuse   bool
	changes atomic.Uint64
	dones   atomic.Pointer[dones]
}

// dones are the done functions handed out for one gobreaker generation of
// a fast-path instance, identified by the instance's change count.
type dones struct {
	changes uint64
	done    func(bool)
	doneV   func(Verdict)
}

func (b *Breaker) newInstance(s *Settings) *instance {
	inst := &instance{interval: s.Interval, bucket: s.BucketPeriod, reuse: s.Interval == 0}
	inst.cb = *gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		MaxRequests:  s.MaxRequests,
		Interval:     s.Interval.D(),
		BucketPeriod: s.BucketPeriod.D(),
		Timeout:      s.Timeout.D(),
		ReadyToTrip:  b.readyToTrip,
		IsExcluded:   isAbandoned,
		OnStateChange: func(_ string, _, to gobreaker.State) {
			// Runs under gobreaker's mutex, right after the generation
			// moved: count it, and only flip a flag.
			inst.changes.Add(1)
			if to == gobreaker.StateOpen {
				inst.trip.CompareAndSwap(tripNone, tripPending)
			}
		},
	})
	return inst
}

// windowCounts returns the counts of an instance with an Interval for the
// window in force now.
// gobreaker's Counts does not advance the window; its State does, as its
// own Allow would: a closed fixed window (Interval without BucketPeriod)
// that ended starts a new generation with zero counts, and a rolling window
// drops the buckets that aged out. So a read after a quiet Interval shows
// what the next call will be counted against, not the expired window.
// An empty window needs no advancing (an idle breaker's steady state once a
// read has rolled it: one lock, as before), and a tripped instance is left
// alone, since State could move it on to half-open. With Interval 0 (the
// default) there is never anything to advance: callers test inst.interval
// and read gobreaker directly, so that read stays the one inlined call it
// was.
func (inst *instance) windowCounts() gobreaker.Counts {
	c := inst.cb.Counts()
	if c == (gobreaker.Counts{}) || inst.trip.Load() != tripNone {
		return c
	}
	inst.cb.State()
	return inst.cb.Counts()
}

// readyToTrip is the trip policy: FailureThreshold consecutive failures, or
// a failure rate over at least MinRequests completed calls in the window.
// It never trips while the breaker is forced closed or disabled.
func (b *Breaker) readyToTrip(c gobreaker.Counts) bool {
	if b.noTrip.Load() {
		return false
	}
	s := b.settings.Load()
	if c.ConsecutiveFailures >= s.FailureThreshold {
		return true
	}
	if s.FailureRate > 0 {
		completed := c.TotalSuccesses + c.TotalFailures
		if completed >= s.MinRequests && float64(c.TotalFailures) >= s.FailureRate*float64(completed) {
			return true
		}
	}
	return false
}

// admitFast asks inst's gobreaker for one call on the fast path. With
// reuse, it also returns the shared done functions of the call's
// generation: the cached entry, or a new empty one for the caller to fill
// and store in inst.dones (nil when the generation could not be pinned
// down). Stored entries are never changed: a caller needing the other
// function stores a filled copy. Racing callers of one generation build
// equal functions, so whichever entry is kept serves.
//
// gobreaker's done closure carries only the generation and the rolling
// bucket's age. With Interval 0 the age is always 0 and the generation
// moves only through setState, which calls OnStateChange under the same
// lock, where changes is counted. So if changes reads the same before and
// after Allow, Allow ran in the generation that count stands for, and any
// done of that generation, wrapped once, serves every such call: the hot
// path allocates gobreaker's closure but not ours. An entry for another
// count is never returned, only replaced.
func (b *Breaker) admitFast(inst *instance) (func(error), *dones, error) {
	before := inst.changes.Load()
	gbDone, err := inst.cb.Allow()
	if err != nil || !inst.reuse || inst.changes.Load() != before {
		return gbDone, nil, err
	}
	if d := inst.dones.Load(); d != nil && d.changes == before {
		return gbDone, d, nil
	}
	return gbDone, &dones{changes: before}, nil
}
