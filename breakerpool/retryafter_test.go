package breakerpool

import (
	"context"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// raDown is the executor outcome of a 429/503 carrying Retry-After.
func raDown(until time.Time) error {
	return &DestinationDownError{Message: "HTTP 429", RetryAfter: until}
}

func TestOpenRetryAfterOpensUntilDeadline(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	until := time.Now().Add(300 * time.Millisecond)
	got, ok := b.OpenRetryAfter(until, SourceLocal)
	if !ok || !got.Equal(until) {
		t.Fatalf("OpenRetryAfter = %v, %v; want %v, true", got, ok, until)
	}
	st := wantStatus(t, b, open, SourceLocal, ModeAuto)
	if st.RetryAfterUntil == nil || !st.RetryAfterUntil.Equal(until) {
		t.Fatalf("RetryAfterUntil = %v, want %v", st.RetryAfterUntil, until)
	}
	if st.OpenRemaining <= 200*time.Millisecond || st.OpenRemaining > 300*time.Millisecond {
		t.Fatalf("open remaining %v", st.OpenRemaining)
	}
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(p.rec.all()) > 0 })
	tr := p.rec.all()
	if len(tr) != 1 || tr[0].To != open || !tr[0].RetryUntil.Equal(until) {
		t.Fatalf("transitions %+v, want one open carrying RetryUntil", tr)
	}
	// A shorter deadline never shortens; a later one extends, no new event.
	if _, ok := b.OpenRetryAfter(time.Now().Add(time.Millisecond), SourceLocal); ok {
		t.Fatal("a shorter Retry-After took effect")
	}
	later := until.Add(200 * time.Millisecond)
	if _, ok := b.OpenRetryAfter(later, SourceHint); !ok {
		t.Fatal("a later Retry-After did not extend")
	}
	if st := b.Status(); !st.RetryAfterUntil.Equal(later) || st.OpenRemaining <= 300*time.Millisecond {
		t.Fatalf("after extend: %+v", st)
	}
	// Then half-open like any opening; the deadline is gone from Status.
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == half })
	if st := b.Status(); st.RetryAfterUntil != nil {
		t.Fatalf("half-open still shows RetryAfterUntil %v", st.RetryAfterUntil)
	}
	// Extending emitted no event: open, then (local) half-open.
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(p.rec.all()) >= 2 })
	if tr := p.rec.all(); len(tr) != 2 || tr[1].To != half {
		t.Fatalf("transitions %+v, want open then half-open", tr)
	}
	mustCall(t, b, true)
	wantStatus(t, b, closed, SourceLocal, ModeAuto)
}

func TestOpenRetryAfterCapAndNoEffect(t *testing.T) {
	s := fastSettings()
	s.MaxRetryAfter = Duration(time.Second)
	p := newTestPool(t, s, Config{})

	// Huge → capped at MaxRetryAfter.
	b := p.Get(keyA)
	got, ok := b.OpenRetryAfter(time.Now().Add(time.Hour), SourceLocal)
	if !ok || time.Until(got) > time.Second {
		t.Fatalf("cap: got %v (%v from now), %v", got, time.Until(got), ok)
	}
	if rem := b.Status().OpenRemaining; rem > time.Second {
		t.Fatalf("open remaining %v beyond the cap", rem)
	}
	// Past deadline: nothing.
	b2 := p.Get(keyB)
	if _, ok := b2.OpenRetryAfter(time.Now().Add(-time.Second), SourceLocal); ok {
		t.Fatal("a past deadline took effect")
	}
	wantStatus(t, b2, closed, SourceLocal, ModeAuto)
	// Forced closed and forced open: an operator's decision wins.
	b2.ForceClosed(SourceOperator)
	if _, ok := b2.OpenRetryAfter(time.Now().Add(time.Second), SourceLocal); ok {
		t.Fatal("forced closed breaker opened")
	}
	b2.Auto(SourceOperator)
	b2.OpenFor(time.Minute, SourceOperator)
	if _, ok := b2.OpenRetryAfter(time.Now().Add(time.Second), SourceLocal); ok {
		t.Fatal("forced open breaker took a Retry-After")
	}

	// MaxRetryAfter 0 turns the feature off for the key.
	off := fastSettings()
	off.MaxRetryAfter = 0
	if err := p.src.SetDestination("endpoint-ra-off", off); err != nil {
		t.Fatal(err)
	}
	b3 := p.Get(Key{TaskGroup: TaskGroupCallback, NamespaceID: "ns1", Destination: "endpoint-ra-off"})
	if _, ok := b3.OpenRetryAfter(time.Now().Add(time.Second), SourceLocal); ok {
		t.Fatal("MaxRetryAfter 0 still honoured Retry-After")
	}
}

// TestExecutableRetryAfter: one 429 with Retry-After opens a closed breaker
// (no need to reach the trip threshold) and a half-open probe answered
// with one reopens it until the deadline, not for Timeout.
func TestExecutableRetryAfter(t *testing.T) {
	s := fastSettings()
	s.Timeout = Duration(time.Hour)
	p := newTestPool(t, s, Config{})
	b := p.Get(keyA)
	until := time.Now().Add(150 * time.Millisecond)
	exec := NewCircuitBreakerExecutable(b, ExecutableFunc(func(context.Context) error { return raDown(until) }))
	if err := exec.Execute(context.Background()); err == nil || IsCircuitBreakerOpen(err) {
		t.Fatalf("first call: %v", err)
	}
	st := wantStatus(t, b, open, SourceLocal, ModeAuto)
	if st.OpenRemaining > 150*time.Millisecond || st.RetryAfterUntil == nil {
		t.Fatalf("status %+v: want open until the Retry-After, not Timeout", st)
	}
	if err := exec.Execute(context.Background()); !IsCircuitBreakerOpen(err) {
		t.Fatalf("second call: %v, want rejected", err)
	}
	// The probe gets another Retry-After: open again until it.
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == half })
	until = time.Now().Add(150 * time.Millisecond)
	_ = exec.Execute(context.Background())
	st = wantStatus(t, b, open, SourceLocal, ModeAuto)
	if st.OpenRemaining > 150*time.Millisecond || !st.RetryAfterUntil.Equal(until) {
		t.Fatalf("after probe: %+v", st)
	}
	if got := b.failure.Load(); got != 2 {
		t.Fatalf("failures counted %d, want 2", got)
	}
}
