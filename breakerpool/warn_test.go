package breakerpool

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/internal/testwait"
)

// warnPool is a test pool with the early warning on (WarnAfter k) whose
// KindFailing events are recorded apart from the transitions.
func warnPool(t *testing.T, k int) (*testPool, *recorder) {
	t.Helper()
	warns := &recorder{}
	return newTestPool(t, fastSettings(), Config{WarnAfter: k, OnFailing: warns.observe}), warns
}

func TestWarnOncePerStreak(t *testing.T) {
	p, warns := warnPool(t, 2)
	b := p.Get(keyA)
	mustCall(t, b, false)
	mustCall(t, b, true)  // one failure, then a success: no streak of 2
	mustCall(t, b, false) // streak 1: 1
	mustCall(t, b, false) // streak 1: 2 → warn
	mustCall(t, b, false)
	mustCall(t, b, false) // 4: still the same streak, no second warn
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(warns.all()) == 1 })
	w := warns.all()[0]
	if w.Kind != KindFailing || w.Key != keyA || w.Failures != 2 || w.From != gobreaker.StateClosed ||
		w.To != gobreaker.StateClosed || w.Source != SourceLocal || w.Generation != b.Generation() {
		t.Fatalf("warning = %+v", w)
	}

	mustCall(t, b, true) // a success ends the streak
	mustCall(t, b, false)
	mustCall(t, b, false) // streak 2 reaches 2 → second warn
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(warns.all()) == 2 })

	// The warning is not a transition: no generation bump, nothing reaches
	// the Observer, the breaker is still closed.
	if g := b.Generation(); g != 0 {
		t.Fatalf("generation %d after warnings, want 0", g)
	}
	if ts := p.rec.all(); len(ts) != 0 {
		t.Fatalf("Observer saw %+v; warnings go to OnFailing only", ts)
	}
	if s := b.Status(); s.State != gobreaker.StateClosed || s.Mode != ModeAuto {
		t.Fatalf("status %+v", s)
	}
}

func TestWarnBeforeTripInOrder(t *testing.T) {
	// Warnings and transitions share the queue and the goroutine: a trip's
	// open transition is delivered after the streak's warning.
	var mu sync.Mutex
	var seq []TransitionKind
	rec := func(tr Transition) {
		mu.Lock()
		seq = append(seq, tr.Kind)
		mu.Unlock()
	}
	p := newTestPool(t, fastSettings(), Config{WarnAfter: 2, OnFailing: rec, Observer: rec})
	b := p.Get(keyA)
	trip(t, b)
	testwait.For(t, 5*time.Second, "the condition", func() bool { mu.Lock(); defer mu.Unlock(); return len(seq) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if seq[0] != KindFailing || seq[1] != KindStateChange {
		t.Fatalf("order %v, want [failing state]", seq)
	}
	if KindFailing.String() != "failing" || KindStateChange.String() != "state" {
		t.Fatal("kind names")
	}
}

func TestWarnNewStreakAfterReopenAndClose(t *testing.T) {
	p, warns := warnPool(t, 2)
	b := p.Get(keyA)
	trip(t, b) // warns once, then opens
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(warns.all()) == 1 })
	// Half-open after the timeout; the probe succeeds and closes it with a
	// fresh counting instance: a new streak warns again.
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == gobreaker.StateHalfOpen })
	mustCall(t, b, true)
	if b.State() != gobreaker.StateClosed {
		t.Fatalf("state %v", b.State())
	}
	mustCall(t, b, false)
	mustCall(t, b, false)
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(warns.all()) == 2 })
	if w := warns.all()[1]; w.Generation != b.Generation() || w.Generation == 0 {
		t.Fatalf("second warning carries generation %d, breaker %d", w.Generation, b.Generation())
	}
}

func TestWarnNotEmitted(t *testing.T) {
	settle := func(p *testPool) {
		// A marker key: its warning arriving proves earlier events were
		// delivered (one queue, one goroutine, FIFO).
		m := p.Get(keyC)
		mustCall(t, m, false)
		mustCall(t, m, false)
	}
	t.Run("disabled", func(t *testing.T) {
		warns := &recorder{}
		p := newTestPool(t, fastSettings(), Config{OnFailing: warns.observe}) // WarnAfter 0
		trip(t, p.Get(keyA))
		if p.warnAfter != 0 {
			t.Fatal("WarnAfter 0 must disable the warning")
		}
		testwait.For(t, 5*time.Second, "the condition", func() bool { return len(p.rec.all()) == 1 }) // the open transition
		if ws := warns.all(); len(ws) != 0 {
			t.Fatalf("disabled: got %+v", ws)
		}
	})
	t.Run("no OnFailing", func(t *testing.T) {
		p := newTestPool(t, fastSettings(), Config{WarnAfter: 2})
		if p.warnAfter != 0 {
			t.Fatal("no consumer: the warning must be off")
		}
		trip(t, p.Get(keyA))
		testwait.For(t, 5*time.Second, "the condition", func() bool { return len(p.rec.all()) == 1 })
		if tr := p.rec.all()[0]; tr.Kind != KindStateChange || tr.To != gobreaker.StateOpen {
			t.Fatalf("Observer got %+v", tr)
		}
	})
	t.Run("guarded forced disabled", func(t *testing.T) {
		p, warns := warnPool(t, 2)
		g := p.Get(keyA)
		g.Guard(SourceHint)
		mustCall(t, g, false) // the guard's probe fails: opens, no warning
		f := p.Get(keyB)
		f.ForceClosed(SourceOperator)
		for range 10 {
			mustCall(t, f, false)
		}
		d := p.Get(Key{Destination: "disabled"})
		s := fastSettings()
		s.Enabled = false
		if err := p.src.SetDestination("disabled", s); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 5*time.Second, "the condition", func() bool { return !d.Settings().Enabled })
		for range 10 {
			mustCall(t, d, false)
		}
		settle(p)
		testwait.For(t, 5*time.Second, "the condition", func() bool { return len(warns.all()) == 1 })
		if w := warns.all()[0]; w.Key != keyC {
			t.Fatalf("warned for %v; only the marker may warn", w.Key)
		}
	})
	t.Run("threshold at or below WarnAfter", func(t *testing.T) {
		p, warns := warnPool(t, int(DefaultFailureThreshold))
		trip(t, p.Get(keyA)) // the 6th failure trips: the trip is reported, not a warning
		testwait.For(t, 5*time.Second, "the condition", func() bool { return len(p.rec.all()) == 1 })
		for range 5 {
			mustCall(t, p.Get(keyC), false)
		}
		if ws := warns.all(); len(ws) != 0 {
			t.Fatalf("got %+v", ws)
		}
	})
}

func TestWarnNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	var warned atomic.Int64
	stuck := func(Transition) { <-release }
	onFailing := func(Transition) { <-release; warned.Add(1) }
	p := newTestPool(t, fastSettings(), Config{ObserverQueue: 2, WarnAfter: 1, OnFailing: onFailing, Observer: stuck})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := range 100 { // 100 streaks on a stuck consumer with a queue of 2
			b := p.Get(Key{Destination: "d", NamespaceID: string(rune('a' + i%26)), TaskGroup: string(rune('a' + i/26))})
			call(b, false)
		}
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("a failure blocked on a stuck OnFailing")
	}
	once.Do(func() { close(release) })
	// Each streak is its breaker's latest event: none is dropped, and all
	// reach OnFailing once it moves (the queue's, then the overflow's).
	testwait.For(t, 10*time.Second, "every streak delivered", func() bool { return warned.Load() == 100 })
	if n := testutil.ToFloat64(p.dropped); n != 0 {
		t.Fatalf("dropped %v, want 0", n)
	}
}

func TestWarnConcurrentFailuresOnce(t *testing.T) {
	p, warns := warnPool(t, 2)
	s := fastSettings()
	s.FailureThreshold = 1000
	if err := p.src.SetDefault(s); err != nil {
		t.Fatal(err)
	}
	b := p.Get(keyA)
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.Settings().FailureThreshold == 1000 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				call(b, false)
			}
		}()
	}
	wg.Wait()
	mustCall(t, p.Get(keyC), false)
	mustCall(t, p.Get(keyC), false) // marker
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(warns.all()) == 2 })
	if n := len(warns.all()); n != 2 {
		t.Fatalf("%d warnings for one streak of 400 concurrent failures (+1 marker)", n)
	}
}

func TestWarnAfterValidation(t *testing.T) {
	if _, err := New(Config{WarnAfter: -1}, nil, nil, nil); err == nil || !contains(err.Error(), "WarnAfter") {
		t.Fatalf("err = %v, want one naming WarnAfter", err)
	}
}

// TestWarnUntilEachCount: with WarnAfter 1 and WarnUntil 2 a streak is
// reported at its first and at its second failure, never again.
func TestWarnUntilEachCount(t *testing.T) {
	warns := &recorder{}
	p := newTestPool(t, fastSettings(), Config{WarnAfter: 1, WarnUntil: 2, OnFailing: warns.observe})
	b := p.Get(keyA)
	mustCall(t, b, false) // 1 → warn
	mustCall(t, b, false) // 2 → warn
	mustCall(t, b, false) // 3: no more
	mustCall(t, b, true)  // the streak ends
	mustCall(t, b, false) // new streak: 1 → warn
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(warns.all()) == 3 })
	got := []uint32{}
	for _, w := range warns.all() {
		got = append(got, w.Failures)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("warned at counts %v, want [1 2 1]", got)
	}
	if _, err := New(Config{WarnUntil: 256}, nil, nil, nil); err == nil || !contains(err.Error(), "WarnUntil") {
		t.Fatalf("err = %v, want one naming WarnUntil", err)
	}
}
