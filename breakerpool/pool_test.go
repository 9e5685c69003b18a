package breakerpool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/internal/testwait"
)

func TestLazyCreationAndReadOnlyLookups(t *testing.T) {
	p := newTestPool(t, DefaultSettings(), Config{})
	if _, ok := p.Lookup(keyA); ok || p.Len() != 0 || len(p.List()) != 0 {
		t.Fatal("lookups created entries")
	}
	b := p.Get(keyB)
	if p.Get(keyB) != b {
		t.Fatal("Get returned a different breaker for the same key")
	}
	p.Get(keyC)
	p.Get(keyA)
	if got, ok := p.Lookup(keyA); !ok || got != p.Get(keyA) {
		t.Fatal("Lookup did not find keyA")
	}
	if _, ok := p.Lookup(Key{TaskGroup: "x"}); ok {
		t.Fatal("Lookup found a missing key")
	}
	list := p.List()
	if p.Len() != 3 || len(list) != 3 {
		t.Fatalf("len %d, list %d", p.Len(), len(list))
	}
	want := []Key{keyC, keyA, keyB} // sorted by task group, namespace, destination
	for i, st := range list {
		if st.Key != want[i] {
			t.Fatalf("list[%d] = %v, want %v", i, st.Key, want[i])
		}
	}
	if b.Name() != "nexusoperations.Invocation/ns1/endpoint-b" || b.Key() != keyB {
		t.Fatal(b.Name())
	}
}

func TestSettingsResolvedPerPair(t *testing.T) {
	p := newTestPool(t, DefaultSettings(), Config{})
	mk := func(n uint32) Settings { s := DefaultSettings(); s.FailureThreshold = n; return s }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.src.SetNamespace("ns1", mk(2)))
	must(p.src.SetDestination("endpoint-b", mk(3)))
	must(p.src.SetPair("ns1", "endpoint-c", mk(4)))
	must(p.src.SetDestination("endpoint-c", mk(5)))
	cases := map[Key]uint32{
		keyA: 2, keyB: 3,
		{TaskGroup: "g", NamespaceID: "ns1", Destination: "endpoint-c"}: 4,
		{TaskGroup: "g", NamespaceID: "ns2", Destination: "endpoint-c"}: 5,
		{TaskGroup: "g", NamespaceID: "ns2", Destination: "other"}:      DefaultFailureThreshold,
	}
	for k, want := range cases {
		if got := p.Get(k).Settings().FailureThreshold; got != want {
			t.Errorf("%v: threshold %d, want %d", k, got, want)
		}
	}
	// Live update through the subscription.
	must(p.src.SetPair("ns1", "endpoint-a", mk(7)))
	testwait.For(t, 5*time.Second, "the condition", func() bool { return p.Get(keyA).Settings().FailureThreshold == 7 })
	p.src.DeletePair("ns1", "endpoint-a")
	testwait.For(t, 5*time.Second, "the condition", func() bool { return p.Get(keyA).Settings().FailureThreshold == 2 })
}

func TestStaticSourceValidation(t *testing.T) {
	src, err := NewStaticSource(DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	cancel := src.Subscribe(func() { calls++ })
	bad := DefaultSettings()
	bad.FailureRate = 0.5 // needs Interval
	var se *SettingsError
	if err := src.SetDestination("d", bad); !errors.As(err, &se) || se.Field != "FailureRate" {
		t.Fatalf("want FailureRate error, got %v", err)
	}
	bad = DefaultSettings()
	bad.FailureThreshold = 0
	if err := src.SetDefault(bad); !errors.As(err, &se) || se.Field != "FailureThreshold" {
		t.Fatalf("want FailureThreshold error, got %v", err)
	}
	if _, err := NewStaticSource(Settings{Timeout: -1, FailureThreshold: 1}); !errors.As(err, &se) || se.Field != "Timeout" {
		t.Fatalf("want Timeout error, got %v", err)
	}
	if calls != 0 {
		t.Fatal("rejected settings notified subscribers")
	}
	// Zero values normalize (Temporal's meanings).
	zero := Settings{FailureThreshold: 6, Enabled: true}
	if err := src.SetNamespace("n", zero); err != nil {
		t.Fatal(err)
	}
	if got := src.Settings("n", "x"); got.MaxRequests != 1 || got.Timeout.D() != 60*time.Second || got.HintPolicy != HintConfirm {
		t.Fatalf("not normalized: %+v", got)
	}
	if calls != 1 {
		t.Fatalf("calls = %d", calls)
	}
	cancel()
	cancel()
	src.DeleteNamespace("n")
	if calls != 1 {
		t.Fatal("cancelled subscriber was called")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{OpenJitter: -0.1}, "OpenJitter"},
		{Config{OpenJitter: 2}, "OpenJitter"},
		{Config{ObserverQueue: -1}, "ObserverQueue"},
		{Config{EvictInterval: -1}, "EvictInterval"},
		{Config{MaxOpenFor: -1}, "MaxOpenFor"},
	} {
		if _, err := New(c.cfg, nil, nil, nil); err == nil || !contains(err.Error(), c.field) {
			t.Errorf("%+v: error %v does not name %s", c.cfg, err, c.field)
		}
	}
	reg := prometheus.NewRegistry()
	p1, err := New(Config{}, nil, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	if _, err := New(Config{}, nil, reg, nil); err == nil {
		t.Fatal("second pool on one registry: want a registration error")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestObserverNeverBlocksBreaker(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	cfg := Config{ObserverQueue: 2, Observer: func(Transition) { <-release }}
	p := newTestPool(t, fastSettings(), cfg)
	b := p.Get(keyA)

	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for range 50 { // 100 transitions against a stuck observer and a queue of 2
			b.OpenFor(time.Hour, SourceHint)
			b.ForceClosed(SourceOperator)
			b.Auto(SourceOperator)
		}
		trip(t, b)
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("breaker blocked on a stuck observer")
	}
	if n := testutil.ToFloat64(p.dropped); n < 90 {
		t.Fatalf("dropped %v, want ≥ 90", n)
	}
	once.Do(func() { close(release) })
}

func TestObserverMayCallBack(t *testing.T) {
	var p *testPool
	seen := make(chan Status, 16)
	p = newTestPool(t, fastSettings(), Config{Observer: func(tr Transition) {
		b, _ := p.Lookup(tr.Key)
		seen <- b.Status()
		_ = p.List()
	}})
	trip(t, p.Get(keyA))
	select {
	case st := <-seen:
		if st.Key != keyA {
			t.Fatal(st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("observer not called")
	}
}

func TestCloseIdempotent(t *testing.T) {
	p, err := New(Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Close() // before Start
	p.Start() // no-op after Close
	p.Close()
	b := p.Get(keyA) // breakers stay usable
	mustCall(t, b, true)
}

// TestConcurrency hammers overlapping keys with calls, external control,
// settings changes and eviction sweeps under -race, then checks invariants.
func TestConcurrency(t *testing.T) {
	s := fastSettings()
	s.Timeout = Duration(5 * time.Millisecond)
	s.MaxRequests = 2
	p := newTestPool(t, s, Config{IdleTTL: time.Millisecond, EvictInterval: time.Millisecond})
	keys := make([]Key, 16)
	for i := range keys {
		keys[i] = Key{TaskGroup: "g", NamespaceID: "ns", Destination: fmt.Sprint("d", i)}
	}
	var wg, callers sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for range 5000 {
				b := p.Get(keys[r.IntN(len(keys))])
				if done, err := b.Allow(); err == nil {
					done(r.IntN(3) != 0)
				} else if !IsCircuitBreakerOpen(err) {
					panic(err)
				}
			}
		}()
	}
	worker := func(fn func(r *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for {
				select {
				case <-stop:
					return
				default:
					fn(r)
				}
			}
		}()
	}
	worker(func(r *rand.Rand) {
		b := p.Get(keys[r.IntN(len(keys))])
		switch r.IntN(5) {
		case 0:
			b.OpenFor(time.Duration(r.IntN(5))*time.Millisecond, SourceHint)
		case 1:
			b.ProbeNow(SourceHint)
		case 2:
			b.Guard(SourceHint)
		case 3:
			b.ForceClosed(SourceOperator)
		case 4:
			b.Auto(SourceOperator)
		}
	})
	worker(func(r *rand.Rand) {
		v := s
		v.FailureThreshold = uint32(1 + r.IntN(5))
		if r.IntN(2) == 0 {
			v.Interval = Duration(time.Second)
		}
		_ = p.src.SetDestination(keys[r.IntN(len(keys))].Destination, v)
		time.Sleep(time.Millisecond) // throttle only
	})
	worker(func(r *rand.Rand) {
		_ = p.List()
		p.EvictIdle(time.Now().Add(time.Hour))
	})
	callers.Wait()
	close(stop)
	wg.Wait()
	// Stop the background sweep (IdleTTL 1 ms) before the checks: it could
	// evict a breaker between List and Lookup below, and did once in CI.
	// Breakers stay usable after Close.
	p.Close()

	t.Logf("evictions during the run: %v", testutil.ToFloat64(p.evicted))
	if got := len(p.List()); got != p.Len() {
		t.Fatalf("Len %d but List %d", p.Len(), got)
	}
	for _, st := range p.List() {
		b, _ := p.Lookup(st.Key)
		b.Auto(SourceOperator)
		b.ForceClosed(SourceOperator)
		b.Auto(SourceOperator)
		if b.State() != gobreaker.StateClosed {
			t.Fatalf("%v did not settle: %+v", st.Key, b.Status())
		}
		mustCall(t, b, true)
	}
}
