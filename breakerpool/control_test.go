package breakerpool

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/internal/testwait"
)

var (
	closed = gobreaker.StateClosed
	half   = gobreaker.StateHalfOpen
	open   = gobreaker.StateOpen
)

func wantStatus(t *testing.T, b *Breaker, state gobreaker.State, src Source, mode Mode) Status {
	t.Helper()
	st := b.Status()
	if st.State != state || st.Source != src || st.Mode != mode {
		t.Fatalf("status = {%v %v %v}, want {%v %v %v}", st.State, st.Source, st.Mode, state, src, mode)
	}
	return st
}

func TestOpenFor(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	b.OpenFor(300*time.Millisecond, SourceHint)
	st := wantStatus(t, b, open, SourceHint, ModeAuto)
	if st.OpenRemaining <= 200*time.Millisecond || st.OpenRemaining > 300*time.Millisecond {
		t.Fatalf("open remaining %v", st.OpenRemaining)
	}
	if call(b, true) {
		t.Fatal("admitted while open")
	}
	// Never shortened; extended by a longer one.
	b.OpenFor(time.Millisecond, SourceHint)
	if rem := b.Status().OpenRemaining; rem < 200*time.Millisecond {
		t.Fatalf("shortened to %v", rem)
	}
	b.OpenFor(time.Hour, SourceOperator)
	st = wantStatus(t, b, open, SourceOperator, ModeForcedOpen)
	if st.OpenRemaining < 59*time.Minute {
		t.Fatalf("not extended: %v", st.OpenRemaining)
	}
	// Capped at MaxOpenFor.
	b.OpenFor(100*24*time.Hour, SourceOperator)
	if rem := b.Status().OpenRemaining; rem > DefaultMaxOpenFor {
		t.Fatalf("not capped: %v", rem)
	}

	// After the period it probes like half-open.
	b2 := p.Get(keyB)
	b2.OpenFor(50*time.Millisecond, SourceHint)
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b2.State() == half })
	wantStatus(t, b2, half, SourceLocal, ModeAuto)
	mustCall(t, b2, true)
	wantStatus(t, b2, closed, SourceLocal, ModeAuto)

	// Ignored: non-positive duration.
	b3 := p.Get(keyC)
	b3.OpenFor(0, SourceHint)
	wantStatus(t, b3, closed, SourceLocal, ModeAuto)
}

func TestProbeNow(t *testing.T) {
	s := DefaultSettings()
	s.MaxRequests = 2
	s.Timeout = Duration(time.Hour)
	p := newTestPool(t, s, Config{})
	b := p.Get(keyA)

	gen := b.Generation()
	b.ProbeNow(SourceHint) // closed: no-op
	if b.Generation() != gen || b.State() != closed {
		t.Fatal("ProbeNow changed a closed breaker")
	}

	trip(t, b)
	b.ProbeNow(SourceHint)
	wantStatus(t, b, half, SourceHint, ModeAuto)
	d1, err1 := b.Allow()
	d2, err2 := b.Allow()
	_, err3 := b.Allow()
	if err1 != nil || err2 != nil || !errors.Is(err3, gobreaker.ErrTooManyRequests) {
		t.Fatalf("probe admission: %v %v %v", err1, err2, err3)
	}
	d1(true)
	if b.State() != half {
		t.Fatal("closed before MaxRequests successes")
	}
	d2(true)
	wantStatus(t, b, closed, SourceLocal, ModeAuto)

	// A failed warm-start probe reopens for Timeout.
	trip(t, b)
	b.ProbeNow(SourceHint)
	mustCall(t, b, false)
	st := wantStatus(t, b, open, SourceLocal, ModeAuto)
	if st.OpenRemaining < 59*time.Minute {
		t.Fatalf("reopened for %v, want Timeout", st.OpenRemaining)
	}
}

func TestGuardSuccess(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	mustCall(t, b, false) // some history, kept across the guard
	gen := b.Generation()
	b.Guard(SourceHint)
	wantStatus(t, b, closed, SourceHint, ModeGuarded)
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Allow(); !IsCircuitBreakerOpen(err) || !errors.Is(err, gobreaker.ErrTooManyRequests) {
		t.Fatalf("second call while guarded: %v", err)
	}
	done(true)
	wantStatus(t, b, closed, SourceHint, ModeAuto)
	if b.Generation() != gen {
		t.Fatal("guard changed the generation without a transition")
	}
	for range 10 {
		mustCall(t, b, true)
	}
}

func TestGuardFailure(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	b.Guard(SourceHint)
	mustCall(t, b, false)
	wantStatus(t, b, open, SourceLocal, ModeAuto)
	if call(b, true) {
		t.Fatal("admitted after the guard probe failed")
	}
	// Guard is a no-op unless closed.
	b.Guard(SourceHint)
	wantStatus(t, b, open, SourceLocal, ModeAuto)
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == half })
	mustCall(t, b, true)
	wantStatus(t, b, closed, SourceLocal, ModeAuto)
}

func TestGuardStaleProbeIgnored(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	b.Guard(SourceHint)
	old, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	b.ForceClosed(SourceOperator) // lifts the guard
	b.Auto(SourceOperator)
	b.Guard(SourceHint) // a new guard episode
	old(false)          // result of the earlier episode: counted, but does not resolve the new guard
	wantStatus(t, b, closed, SourceHint, ModeGuarded)
	mustCall(t, b, true)
	wantStatus(t, b, closed, SourceHint, ModeAuto)
}

func TestForceClosedAndAuto(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	trip(t, b)
	b.ForceClosed(SourceOperator)
	wantStatus(t, b, closed, SourceOperator, ModeForcedClosed)
	for range 20 {
		mustCall(t, b, false)
	}
	if c := b.Counts(); c.ConsecutiveFailures != 20 {
		t.Fatalf("forced closed did not count: %+v", c)
	}
	// Hints cannot open or guard it; an operator can.
	b.OpenFor(time.Hour, SourceHint)
	b.Guard(SourceHint)
	wantStatus(t, b, closed, SourceOperator, ModeForcedClosed)

	b.Auto(SourceOperator)
	wantStatus(t, b, closed, SourceOperator, ModeAuto)
	mustCall(t, b, false) // 21 consecutive failures: trips at once
	wantStatus(t, b, open, SourceLocal, ModeAuto)

	b.ForceClosed(SourceOperator)
	b.OpenFor(time.Hour, SourceOperator)
	wantStatus(t, b, open, SourceOperator, ModeForcedOpen)
	// A peer's closed hint cannot warm-start an operator's open.
	b.ProbeNow(SourceHint)
	wantStatus(t, b, open, SourceOperator, ModeForcedOpen)
	// Auto clears the force and warm-starts a probe.
	b.Auto(SourceOperator)
	wantStatus(t, b, half, SourceOperator, ModeAuto)
	mustCall(t, b, true)
	wantStatus(t, b, closed, SourceLocal, ModeAuto)

	// Auto leaves a hint's open alone.
	b.OpenFor(time.Hour, SourceHint)
	b.Auto(SourceOperator)
	wantStatus(t, b, open, SourceHint, ModeAuto)
}

func TestTransitionsReachObserver(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	trip(t, b)                           // closed→open local
	b.ProbeNow(SourceHint)               // open→half-open hint
	mustCall(t, b, true)                 // half-open→closed local
	b.OpenFor(time.Hour, SourceOperator) // closed→open operator
	b.ForceClosed(SourceOperator)        // open→closed operator
	type tr struct {
		from, to gobreaker.State
		src      Source
		gen      uint64
	}
	want := []tr{
		{closed, open, SourceLocal, 1}, {open, half, SourceHint, 2}, {half, closed, SourceLocal, 3},
		{closed, open, SourceOperator, 4}, {open, closed, SourceOperator, 5},
	}
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(p.rec.all()) == len(want) })
	got := p.rec.all()
	for i, w := range want {
		g := got[i]
		if g.Key != keyA || g.From != w.from || g.To != w.to || g.Source != w.src || g.Generation != w.gen {
			t.Fatalf("transition %d = %+v, want %+v", i, g, w)
		}
	}
	if got[0].OpenFor != 60*time.Millisecond || got[3].OpenFor != time.Hour || got[1].OpenFor != 0 {
		t.Fatalf("OpenFor: %v %v %v", got[0].OpenFor, got[3].OpenFor, got[1].OpenFor)
	}
	if b.Generation() != 5 {
		t.Fatalf("generation %d", b.Generation())
	}
}

// TestOpenRemaining: the lock-free OpenRemaining agrees with Status while
// open, and is zero when closed or half-open.
func TestOpenRemaining(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	if r := b.OpenRemaining(); r != 0 {
		t.Fatalf("closed: open remaining %v", r)
	}
	b.OpenFor(time.Hour, SourceOperator)
	if r := b.OpenRemaining(); r <= 59*time.Minute || r > time.Hour {
		t.Fatalf("open for an hour: open remaining %v", r)
	}
	if st := b.Status(); st.OpenRemaining-b.OpenRemaining() > time.Second {
		t.Fatalf("Status says %v, OpenRemaining %v", st.OpenRemaining, b.OpenRemaining())
	}
	b.ProbeNow(SourceOperator)
	wantStatus(t, b, half, SourceOperator, ModeAuto)
	if r := b.OpenRemaining(); r != 0 {
		t.Fatalf("half-open: open remaining %v", r)
	}
}
