package breakerpool

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects observed transitions.
type recorder struct {
	mu sync.Mutex
	ts []Transition
}

func (r *recorder) observe(t Transition) {
	r.mu.Lock()
	r.ts = append(r.ts, t)
	r.mu.Unlock()
}

func (r *recorder) all() []Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Transition(nil), r.ts...)
}

type testPool struct {
	*Pool
	src *StaticSource
	reg *prometheus.Registry
	rec *recorder
}

// newTestPool starts a pool over a StaticSource with def as the default, no
// jitter, a recording observer and its own registry.
func newTestPool(t testing.TB, def Settings, cfg Config) *testPool {
	t.Helper()
	src, err := NewStaticSource(def)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if cfg.Observer == nil {
		cfg.Observer = rec.observe
	}
	if cfg.OpenJitter == 0 {
		cfg.DisableJitter = true
	}
	reg := prometheus.NewRegistry()
	p, err := New(cfg, src, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Close)
	return &testPool{Pool: p, src: src, reg: reg, rec: rec}
}

func fastSettings() Settings {
	s := DefaultSettings()
	s.Timeout = Duration(60 * time.Millisecond)
	return s
}

var (
	keyA = Key{TaskGroup: TaskGroupNexusInvocation, NamespaceID: "ns1", Destination: "endpoint-a"}
	keyB = Key{TaskGroup: TaskGroupNexusInvocation, NamespaceID: "ns1", Destination: "endpoint-b"}
	keyC = Key{TaskGroup: TaskGroupNexusCancelation, NamespaceID: "ns1", Destination: "endpoint-a"}
)

// call makes one call through b with the given outcome; it reports whether
// the call was admitted.
func call(b *Breaker, ok bool) bool {
	done, err := b.Allow()
	if err != nil {
		return false
	}
	done(ok)
	return true
}

func mustCall(t testing.TB, b *Breaker, ok bool) {
	t.Helper()
	if !call(b, ok) {
		t.Fatalf("%s: call rejected in state %v", b.Name(), b.State())
	}
}

// trip fails calls until b opens.
func trip(t testing.TB, b *Breaker) {
	t.Helper()
	for range 1000 {
		if !call(b, false) {
			break
		}
	}
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("breaker did not open: %v", b.State())
	}
}
