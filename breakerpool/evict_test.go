package breakerpool

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

const testTTL = time.Minute

// sweepIdle runs the two sweeps an unused breaker needs to be evicted: one
// that clears its use flag, one a TTL later.
func sweepIdle(p *testPool) int {
	now := time.Now()
	return p.EvictIdle(now) + p.EvictIdle(now.Add(testTTL+time.Second))
}

func TestEvictClosedIdle(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
	b := p.Get(keyA)
	mustCall(t, b, true)
	mustCall(t, b, false)
	mustCall(t, b, true) // a failure followed by success: no consecutive failures left
	p.Get(keyB)

	now := time.Now()
	if n := p.EvictIdle(now.Add(testTTL + time.Second)); n != 0 {
		t.Fatalf("evicted %d breakers that were just used", n)
	}
	// Used again between sweeps: survives.
	mustCall(t, p.Get(keyB), true)
	if n := p.EvictIdle(now.Add(2*testTTL + 2*time.Second)); n != 1 {
		t.Fatalf("evicted %d, want 1 (keyA only)", n)
	}
	if _, ok := p.Lookup(keyA); ok {
		t.Fatal("keyA still present")
	}
	if _, ok := p.Lookup(keyB); !ok {
		t.Fatal("keyB, used within the TTL, was evicted")
	}
	if p.Len() != 1 || testutil.ToFloat64(p.evicted) != 1 {
		t.Fatalf("len %d, evictions %v", p.Len(), testutil.ToFloat64(p.evicted))
	}
	// Eviction disabled.
	q := newTestPool(t, fastSettings(), Config{IdleTTL: -1})
	q.Get(keyA)
	if sweepIdle(q) != 0 || q.Len() != 1 {
		t.Fatal("evicted with IdleTTL < 0")
	}
}

func TestNeverEvicted(t *testing.T) {
	rate := fastSettings()
	rate.Interval = Duration(time.Hour)
	rate.FailureRate = 0.9
	rate.MinRequests = 100
	cases := map[string]func(p *testPool, b *Breaker) (cleanup func()){
		"consecutive failure": func(_ *testPool, b *Breaker) func() { mustCall(t, b, false); return nil },
		"open": func(_ *testPool, b *Breaker) func() {
			b.OpenFor(time.Hour, SourceHint)
			return nil
		},
		"half-open": func(_ *testPool, b *Breaker) func() {
			b.OpenFor(time.Hour, SourceHint)
			b.ProbeNow(SourceHint)
			return nil
		},
		"forced closed": func(_ *testPool, b *Breaker) func() { b.ForceClosed(SourceOperator); return nil },
		"guarded":       func(_ *testPool, b *Breaker) func() { b.Guard(SourceHint); return nil },
		"in flight": func(_ *testPool, b *Breaker) func() {
			done, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			return func() { done(true) }
		},
		"failures in a rate window": func(p *testPool, b *Breaker) func() {
			if err := p.src.SetDefault(rate); err != nil {
				t.Fatal(err)
			}
			p.RefreshSettings()
			mustCall(t, b, false)
			mustCall(t, b, true)
			return nil
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
			b := p.Get(keyA)
			if cleanup := setup(p, b); cleanup != nil {
				defer cleanup()
			}
			if n := sweepIdle(p); n != 0 {
				t.Fatalf("evicted %d", n)
			}
			if got, ok := p.Lookup(keyA); !ok || got != b {
				t.Fatal("breaker replaced")
			}
		})
	}
}

func TestFloodCannotEvictFailingBreaker(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
	failing := p.Get(keyA)
	for range 5 {
		mustCall(t, failing, false) // one short of tripping
	}
	openB := p.Get(keyB)
	trip(t, openB)
	openB.OpenFor(time.Hour, SourceHint)
	now := time.Now()
	for round := range 5 {
		for i := range 2000 {
			mustCall(t, p.Get(Key{TaskGroup: "flood", NamespaceID: "ns", Destination: fmt.Sprint(round, "-", i)}), true)
		}
		now = now.Add(testTTL + time.Second)
		p.EvictIdle(now)
	}
	now = now.Add(testTTL + time.Second)
	p.EvictIdle(now)
	if p.Len() != 2 {
		t.Fatalf("len %d after the flood, want the two failing breakers", p.Len())
	}
	if got, _ := p.Lookup(keyA); got != failing || failing.Counts().ConsecutiveFailures != 5 {
		t.Fatal("failing breaker lost its history")
	}
	mustCall(t, failing, false)
	if failing.State() != open {
		t.Fatalf("6th failure did not trip: %v", failing.State())
	}
}

func TestEvictedReferenceForwards(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
	stale := p.Get(keyA)
	if sweepIdle(p) != 1 {
		t.Fatal("not evicted")
	}
	// A holder of the evicted breaker reaches the live entry.
	for range 6 {
		mustCall(t, stale, false)
	}
	live, ok := p.Lookup(keyA)
	if !ok || live == stale || live.State() != open {
		t.Fatalf("calls on an evicted breaker did not reach a live one (ok=%v)", ok)
	}
	if stale.Counts().TotalFailures != 0 {
		t.Fatal("the evicted breaker counted calls")
	}
	// Control calls forward too.
	q := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
	stale = q.Get(keyA)
	sweepIdle(q)
	stale.OpenFor(time.Hour, SourceHint)
	if live, ok := q.Lookup(keyA); !ok || live.State() != open || live.Status().Source != SourceHint {
		t.Fatal("OpenFor on an evicted breaker was lost")
	}
}

func TestEvictedSeriesRemoved(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
	mustCall(t, p.Get(keyA), true)
	mustCall(t, p.Get(keyB), true)
	mustCall(t, p.Get(keyB), false)
	if n := testutil.CollectAndCount(p.reg, "fusebox_breaker_state"); n != 2 {
		t.Fatalf("%d state series", n)
	}
	if sweepIdle(p) != 1 {
		t.Fatal("keyA not evicted")
	}
	for name, want := range map[string]int{
		"fusebox_breaker_state": 1, "fusebox_breaker_requests_total": 3,
		"fusebox_breaker_consecutive_failures": 1, "fusebox_circuit_breaker_executable_blocked_total": 1,
	} {
		if n := testutil.CollectAndCount(p.reg, name); n != want {
			t.Errorf("%s: %d series after eviction, want %d", name, n, want)
		}
	}
}

// A breaker idle for staleFactor TTLs is evicted in any automatic state: a
// key that failed once and then saw no traffic used to stay for ever (one
// breaker per made-up namespace). An operator's forced state still keeps
// it, and within the stale time the other rules stand (TestNeverEvicted).
func TestStaleBreakerEvictedInAnyState(t *testing.T) {
	cases := map[string]func(b *Breaker){
		"consecutive failure": func(b *Breaker) { mustCall(t, b, false) },
		"open":                func(b *Breaker) { trip(t, b) },
		"half-open": func(b *Breaker) {
			b.OpenFor(time.Hour, SourceHint)
			b.ProbeNow(SourceHint)
		},
		"guarded": func(b *Breaker) { b.Guard(SourceHint) },
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
			setup(p.Get(keyA))
			now := time.Now()
			p.EvictIdle(now)
			if n := p.EvictIdle(now.Add(staleFactor*testTTL - time.Second)); n != 0 {
				t.Fatalf("evicted %d before the stale time", n)
			}
			if n := p.EvictIdle(now.Add(staleFactor*testTTL + time.Second)); n != 1 {
				t.Fatalf("evicted %d after the stale time, want 1", n)
			}
		})
	}
	for name, setup := range map[string]func(b *Breaker){
		"forced closed": func(b *Breaker) { b.ForceClosed(SourceOperator) },
		"forced open":   func(b *Breaker) { b.OpenFor(time.Hour, SourceOperator) },
	} {
		t.Run(name, func(t *testing.T) {
			p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: time.Hour})
			setup(p.Get(keyA))
			now := time.Now()
			p.EvictIdle(now)
			if n := p.EvictIdle(now.Add(10 * staleFactor * testTTL)); n != 0 {
				t.Fatalf("evicted %d breakers an operator forced", n)
			}
		})
	}
}
