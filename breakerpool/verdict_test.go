package breakerpool

import (
	"context"
	"errors"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// An abandoned call gives its permit back and counts for nothing: a closed
// breaker's streak of failures goes on across it, and an abandoned
// half-open or guard probe neither closes nor reopens the breaker — the
// next call probes instead.
func TestAbandonedCallsHaveNoVerdict(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	abandon := func() {
		t.Helper()
		done, err := b.AllowVerdict()
		if err != nil {
			t.Fatalf("abandoned call rejected in state %v: %v", b.State(), err)
		}
		done(VerdictNone)
	}

	for range 3 {
		mustCall(t, b, false)
	}
	abandon()
	if c := b.Counts(); c.ConsecutiveFailures != 3 || c.TotalSuccesses != 0 {
		t.Fatalf("counts after an abandoned call: %+v", c)
	}
	for range 2 {
		mustCall(t, b, false)
	}
	if b.State() != closed {
		t.Fatalf("tripped after 5 failures and an abandoned call: %v", b.State())
	}
	mustCall(t, b, false) // the 6th failure trips, as with no abandoned call at all
	if b.State() != open {
		t.Fatalf("state %v after 6 failures, want open", b.State())
	}

	testwait.For(t, time.Second, "the condition", func() bool { return b.State() == half })
	abandon() // the half-open probe is abandoned: still half-open, permit back
	if b.State() != half {
		t.Fatalf("abandoned probe moved the breaker to %v", b.State())
	}
	mustCall(t, b, true) // another probe is admitted and closes it
	if b.State() != closed {
		t.Fatalf("state %v after a successful probe", b.State())
	}

	b.Guard(SourceHint)
	abandon()
	if st := b.Status(); st.Mode != ModeGuarded {
		t.Fatalf("abandoned guard probe lifted the guard: %+v", st)
	}
	mustCall(t, b, true)
	if st := b.Status(); st.Mode != ModeAuto || st.State != closed {
		t.Fatalf("after the guard's probe succeeded: %+v", st)
	}
}

// CircuitBreakerExecutable abandons a call whose context was cancelled.
func TestExecutableCancelledCallHasNoVerdict(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	trip(t, b)
	testwait.For(t, time.Second, "the condition", func() bool { return b.State() == half })
	ctx, cancel := context.WithCancel(context.Background())
	err := NewCircuitBreakerExecutable(b, ExecutableFunc(func(ctx context.Context) error {
		cancel()
		return ctx.Err()
	})).Execute(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if b.State() != half {
		t.Fatalf("a cancelled probe decided the breaker: %v (it must stay half-open)", b.State())
	}
	if !call(b, false) || b.State() != open {
		t.Fatalf("the next probe was not admitted or did not reopen: %v", b.State())
	}
}
