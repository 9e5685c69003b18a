package breakerpool

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/internal/testwait"
)

func TestStateMachine(t *testing.T) {
	type step struct {
		do        string // "ok", "fail", "reject", "wait-half-open", "settings"
		wantState gobreaker.State
	}
	closed, open, half := gobreaker.StateClosed, gobreaker.StateOpen, gobreaker.StateHalfOpen
	rep := func(n int, s step) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	cat := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name  string
		tweak func(*Settings)
		steps []step
	}{
		{"trips on the 6th consecutive failure by default", nil, cat(
			rep(5, step{"fail", closed}), []step{{"fail", open}, {"reject", open}})},
		{"a success resets the consecutive count", nil, cat(
			rep(5, step{"fail", closed}), []step{{"ok", closed}}, rep(5, step{"fail", closed}), []step{{"fail", open}})},
		{"custom threshold", func(s *Settings) { s.FailureThreshold = 2 }, []step{
			{"fail", closed}, {"fail", open}}},
		{"half-open admits MaxRequests, all must succeed", func(s *Settings) { s.MaxRequests = 3 }, cat(
			rep(6, step{"fail", -1}), []step{{"wait-half-open", half}, {"hold", half}, {"hold", half}, {"hold", half}, {"reject", half},
				{"release-ok", half}, {"release-ok", half}, {"release-ok", closed}, {"ok", closed}})},
		{"a failed probe reopens", nil, cat(
			rep(6, step{"fail", -1}), []step{{"wait-half-open", half}, {"fail", open}, {"reject", open}, {"wait-half-open", half}, {"ok", closed}})},
		{"disabled passes through and never trips", func(s *Settings) { s.Enabled = false },
			rep(20, step{"fail", closed})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fastSettings()
			if tc.tweak != nil {
				tc.tweak(&s)
			}
			p := newTestPool(t, s, Config{})
			b := p.Get(keyA)
			var held []func(bool)
			for i, st := range tc.steps {
				switch st.do {
				case "ok", "fail":
					mustCall(t, b, st.do == "ok")
				case "reject":
					if _, err := b.Allow(); !IsCircuitBreakerOpen(err) {
						t.Fatalf("step %d: want rejection, got %v", i, err)
					}
				case "wait-half-open":
					testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == half })
				case "hold":
					done, err := b.Allow()
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					held = append(held, done)
				case "release-ok":
					held[0](true)
					held = held[1:]
				}
				if st.wantState >= 0 && b.State() != st.wantState {
					t.Fatalf("step %d (%s): state %v, want %v", i, st.do, b.State(), st.wantState)
				}
			}
		})
	}
}

func TestRejectionErrors(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	trip(t, b)
	_, err := b.Allow()
	var re *ResourceExhaustedError
	if !errors.As(err, &re) || re.Cause != CauseCircuitBreakerOpen || !errors.Is(err, gobreaker.ErrOpenState) {
		t.Fatalf("open rejection: %v", err)
	}
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == gobreaker.StateHalfOpen })
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Allow()
	if !IsCircuitBreakerOpen(err) || !errors.Is(err, gobreaker.ErrTooManyRequests) {
		t.Fatalf("half-open rejection: %v", err)
	}
	done(true)
}

func TestLateResultsFromOldGenerationIgnored(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)

	// A call admitted while closed resolves after the breaker opened and closed again.
	late, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	trip(t, b)
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == gobreaker.StateHalfOpen })
	mustCall(t, b, true)
	late(false)
	if c := b.Counts(); c.TotalFailures != 0 || c.ConsecutiveFailures != 0 {
		t.Fatalf("late failure was counted: %+v", c)
	}

	// A probe of an earlier half-open generation is ignored.
	trip(t, b)
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == gobreaker.StateHalfOpen })
	oldProbe, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	b.OpenFor(time.Hour, SourceHint)
	b.ProbeNow(SourceHint)
	newProbe, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	oldProbe(false)
	if b.State() != gobreaker.StateHalfOpen {
		t.Fatalf("stale probe failure changed state to %v", b.State())
	}
	newProbe(true)
	if b.State() != gobreaker.StateClosed {
		t.Fatalf("state %v after the current probe succeeded", b.State())
	}
}

func TestSettingsChangeKeepsOpenBreakerOpen(t *testing.T) {
	s := DefaultSettings()
	s.Timeout = Duration(400 * time.Millisecond)
	p := newTestPool(t, s, Config{})
	b := p.Get(keyA)
	trip(t, b)
	before := b.Status()
	if before.OpenRemaining <= 0 || before.OpenRemaining > 400*time.Millisecond {
		t.Fatalf("open remaining %v", before.OpenRemaining)
	}
	gen := b.Generation()

	changed := s
	changed.Timeout = Duration(time.Hour)
	changed.Interval = Duration(time.Minute)
	changed.MaxRequests = 2
	if err := p.src.SetDestination(keyA.Destination, changed); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.Settings() == changed })
	after := b.Status()
	if after.State != gobreaker.StateOpen || after.Generation != gen {
		t.Fatalf("settings change moved the breaker: %+v", after)
	}
	if after.OpenRemaining > before.OpenRemaining {
		t.Fatalf("open time grew from %v to %v", before.OpenRemaining, after.OpenRemaining)
	}
	// The old deadline still holds: half-open well before the new 1h Timeout.
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == gobreaker.StateHalfOpen })
	// The new MaxRequests applies to the probe.
	d1, err1 := b.Allow()
	d2, err2 := b.Allow()
	if err1 != nil || err2 != nil {
		t.Fatalf("probes: %v %v", err1, err2)
	}
	d1(true)
	d2(true)
	if b.State() != gobreaker.StateClosed {
		t.Fatalf("state %v", b.State())
	}
}

func TestIdenticalSettingsAreNoOp(t *testing.T) {
	p := newTestPool(t, DefaultSettings(), Config{})
	b := p.Get(keyA)
	for range 3 {
		mustCall(t, b, false)
	}
	inst := b.cur.Load()
	if err := p.src.SetPair(keyA.NamespaceID, keyA.Destination, DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	p.RefreshSettings()
	if b.cur.Load() != inst || b.Counts().ConsecutiveFailures != 3 {
		t.Fatalf("identical settings reset the breaker: %+v", b.Counts())
	}
	// A threshold change keeps the counts too (read live by the trip policy).
	s := DefaultSettings()
	s.FailureThreshold = 4
	if err := p.src.SetPair(keyA.NamespaceID, keyA.Destination, s); err != nil {
		t.Fatal(err)
	}
	p.RefreshSettings()
	if b.cur.Load() != inst {
		t.Fatal("threshold change rebuilt the instance")
	}
	mustCall(t, b, false)
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("4th failure with threshold 4: %v", b.State())
	}
}

func TestFailureRateTrip(t *testing.T) {
	s := DefaultSettings()
	s.FailureThreshold = 100
	s.Interval = Duration(time.Minute)
	s.BucketPeriod = Duration(10 * time.Second)
	s.FailureRate = 0.5
	s.MinRequests = 10
	p := newTestPool(t, s, Config{})
	b := p.Get(keyA)
	// 9 completed calls, 5 failures (56%): below MinRequests, stays closed.
	for i := range 9 {
		mustCall(t, b, i%2 == 1)
	}
	if b.State() != gobreaker.StateClosed {
		t.Fatalf("tripped below MinRequests: %+v", b.Counts())
	}
	mustCall(t, b, true)  // 10 completed, 50%, but only a failure trips
	mustCall(t, b, false) // 11 completed, 6 failures: 55%
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("did not trip at 55%%: %+v", b.Counts())
	}

	// Below the rate with enough requests: stays closed until the rate is reached.
	b = p.Get(keyB)
	for _, ok := range []bool{true, true, true, true, true, true, false, false, false, false, false} {
		mustCall(t, b, ok)
	}
	if b.State() != gobreaker.StateClosed { // 5 of 11: 45%
		t.Fatalf("tripped at 45%%: %+v", b.Counts())
	}
	mustCall(t, b, false) // 6 of 12: 50%
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("did not trip at 50%%: %+v", b.Counts())
	}
}

func TestDisabledCountsEverything(t *testing.T) {
	s := fastSettings()
	s.Enabled = false
	p := newTestPool(t, s, Config{})
	b := p.Get(keyA)
	for range 50 {
		mustCall(t, b, false)
	}
	if c := b.Counts(); c.TotalFailures != 50 || c.ConsecutiveFailures != 50 {
		t.Fatalf("counts %+v", c)
	}
	if st := b.Status(); st.Mode != ModeDisabled || st.State != gobreaker.StateClosed {
		t.Fatalf("status %+v", st)
	}
	b.OpenFor(time.Hour, SourceOperator)
	b.Guard(SourceHint)
	mustCall(t, b, true)
	// Disabling an open breaker closes it.
	b2 := p.Get(keyB)
	p.src.SetDestination(keyB.Destination, fastSettings())
	p.RefreshSettings()
	trip(t, b2)
	p.src.DeleteDestination(keyB.Destination)
	p.RefreshSettings()
	if b2.State() != gobreaker.StateClosed || b2.Status().Source != SourceOperator {
		t.Fatalf("disabling left %+v", b2.Status())
	}
	mustCall(t, b2, false)
}

func TestPerKeyIsolation(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	trip(t, p.Get(keyA))
	for _, k := range []Key{keyB, keyC, {TaskGroup: keyA.TaskGroup, NamespaceID: "ns2", Destination: keyA.Destination}} {
		mustCall(t, p.Get(k), true)
		if st := p.Get(k).State(); st != gobreaker.StateClosed {
			t.Fatalf("%v: %v", k, st)
		}
	}
}

func TestOpenTimeoutJitter(t *testing.T) {
	s := DefaultSettings()
	s.Timeout = Duration(10 * time.Second)
	p := newTestPool(t, s, Config{OpenJitter: 0.2})
	seen := map[time.Duration]bool{}
	for i := range 20 {
		b := p.Get(Key{TaskGroup: "g", NamespaceID: "n", Destination: string(rune('a' + i))})
		trip(t, b)
		rem := b.Status().OpenRemaining
		if rem > 12*time.Second || rem < 9*time.Second {
			t.Fatalf("open remaining %v outside [10s, 12s)", rem)
		}
		seen[rem.Round(10*time.Millisecond)] = true
	}
	if len(seen) < 5 {
		t.Fatalf("openings are not spread: %v", seen)
	}
}

// With Interval 0 every call of one gobreaker generation shares one done
// function (admitFast): a call allocates only gobreaker's closure. With a
// counting interval the generation can move without a state change, so
// each call gets its own.
func TestDonesSharedWithinAGeneration(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		allocs   float64
	}{{0, 1}, {time.Minute, 2}} {
		s := DefaultSettings()
		s.Interval = Duration(tc.interval)
		b := newTestPool(t, s, Config{}).Get(keyA)
		got := testing.AllocsPerRun(200, func() {
			done, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			done(true)
		})
		if got != tc.allocs {
			t.Errorf("interval %v: %v allocations per call, want %v", tc.interval, got, tc.allocs)
		}
		// Shared or not, failures still count and trip on the 6th.
		for i := 1; i < DefaultFailureThreshold; i++ {
			mustCall(t, b, false)
		}
		if st := b.State(); st != gobreaker.StateClosed {
			t.Fatalf("interval %v: %v after %d failures", tc.interval, st, DefaultFailureThreshold-1)
		}
		mustCall(t, b, false)
		if st := b.State(); st != gobreaker.StateOpen {
			t.Fatalf("interval %v: %v after %d failures", tc.interval, st, DefaultFailureThreshold)
		}
	}
}
