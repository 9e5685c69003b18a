package healthprobe

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/goleak"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var key = breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns", Destination: "ep"}

// healthServer is a real destination whose /health answers healthy or 503,
// counting calls.
type healthServer struct {
	*httptest.Server
	healthy atomic.Bool
	calls   atomic.Int64
}

func newHealthServer(t *testing.T) *healthServer {
	h := &healthServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		if h.healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(h.Close)
	return h
}

type fixture struct {
	pool   *breakerpool.Pool
	prober *Prober
	reg    *prometheus.Registry
	srv    *healthServer
	owner  atomic.Value // string
	check  atomic.Pointer[Check]
}

// newFixture is a real pool (Timeout 100ms, no jitter) feeding a prober
// whose key has a health check against a real server (interval 200ms).
func newFixture(t *testing.T, cfg Config, allow func(context.Context, breakerpool.Key, string) error) *fixture {
	t.Helper()
	f := &fixture{srv: newHealthServer(t), reg: prometheus.NewRegistry()}
	f.owner.Store("n1")
	// The node's settings source, with the breaker Timeout set as an
	// operator would.
	src := dynconfig.NewCollection(nil)
	t.Cleanup(func() { _ = src.Close() }) // after the pool's
	src.Update([]dynconfig.Entry{{Key: dynconfig.KeyBreakerSettings, Value: json.RawMessage(`{"Timeout":"100ms"}`)}})
	if src.Current().Invalid() != nil || src.Settings("ns", "ep").Timeout.D() != 100*time.Millisecond {
		t.Fatalf("settings: %+v (%v)", src.Settings("ns", "ep"), src.Current().Invalid())
	}
	var fwd atomic.Pointer[Prober]
	pool, err := breakerpool.New(breakerpool.Config{DisableJitter: true, Observer: func(tr breakerpool.Transition) {
		if p := fwd.Load(); p != nil {
			p.Observe(tr)
		}
	}}, src, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Start()
	t.Cleanup(pool.Close)
	f.check.Store(&Check{URL: f.srv.URL + "/health", Interval: 200 * time.Millisecond, Timeout: 100 * time.Millisecond, HealthyStatus: 200})
	cfg.NodeID = "n1"
	cfg.Registerer = f.reg
	p, err := New(cfg, Deps{
		Pool:   pool,
		Checks: func(k breakerpool.Key) (Check, bool) { return *f.check.Load(), k == key },
		Owner:  func(breakerpool.Key) string { return f.owner.Load().(string) },
		Allow:  allow,
	})
	if err != nil {
		t.Fatal(err)
	}
	fwd.Store(p)
	p.Start()
	t.Cleanup(p.Close)
	f.pool, f.prober = pool, p
	return f
}

func (f *fixture) checks(role, result string) float64 {
	return testutil.ToFloat64(f.prober.met.checks.WithLabelValues(role, result))
}

// The owner keeps an open breaker open (no half-open probe with a real
// call) while the health check fails, far past the breaker's own 100ms
// Timeout; once it passes, the breaker goes half-open (source health) and
// a real call closes it.
func TestOwnerHoldsOpenUntilHealthy(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	b := f.pool.Get(key)
	b.OpenFor(100*time.Millisecond, breakerpool.SourceLocal)
	testwait.For(t, 10*time.Second, "three failed health checks", func() bool { return f.checks(RoleOwner, ResultFail) >= 3 })
	if st := b.Status(); st.State != gobreaker.StateOpen {
		t.Fatalf("breaker %v after 3 failed health checks, want open", st.State)
	}
	if r, ok := f.prober.Last(key); !ok || r.Result != ResultFail || r.Status != 503 || r.Role != RoleOwner {
		t.Fatalf("last result %+v", r)
	}
	f.srv.healthy.Store(true)
	testwait.For(t, 10*time.Second, "half-open after a passed check", func() bool { return b.State() == gobreaker.StateHalfOpen })
	if st := b.Status(); st.Source != breakerpool.SourceHealth {
		t.Fatalf("half-open source %v", st.Source)
	}
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(true)
	if b.State() != gobreaker.StateClosed {
		t.Fatalf("state %v after the probe passed", b.State())
	}
}

// A half-open breaker that no call resolves does not stay stuck: one
// interval later a passing health check closes it, a failing one reopens it.
func TestHalfOpenWithoutTrafficSettles(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	f.srv.healthy.Store(true)
	b := f.pool.Get(key)
	b.OpenFor(time.Hour, breakerpool.SourceHint)
	b.ProbeNow(breakerpool.SourceHint) // a warm start no task follows
	testwait.For(t, 10*time.Second, "closed by a settling check", func() bool { return b.State() == gobreaker.StateClosed })
	if f.checks(RoleSettle, ResultPass) != 1 {
		t.Fatalf("settle passes %v", f.checks(RoleSettle, ResultPass))
	}

	f.srv.healthy.Store(false)
	b.OpenFor(time.Hour, breakerpool.SourceHint)
	b.ProbeNow(breakerpool.SourceHint)
	testwait.For(t, 10*time.Second, "reopened by a failing settling check", func() bool { return f.checks(RoleSettle, ResultFail) >= 1 })
	if st := b.Status(); st.State != gobreaker.StateOpen || st.Source != breakerpool.SourceLocal {
		t.Fatalf("status %v/%v, want open/local", st.State, st.Source)
	}
}

// A node that is not the probe owner makes no health call before its
// fallback (FallbackIntervals intervals), and holds the breaker open
// meanwhile; becoming the owner starts the interval calls.
func TestNonOwnerWaitsForFallback(t *testing.T) {
	f := newFixture(t, Config{FallbackIntervals: 4}, nil)
	f.owner.Store("n2")
	b := f.pool.Get(key)
	b.OpenFor(100*time.Millisecond, breakerpool.SourceLocal)
	start := time.Now()
	testwait.For(t, 10*time.Second, "a fallback check", func() bool { return f.checks(RoleFallback, ResultFail) >= 1 })
	if el := time.Since(start); el < 4*200*time.Millisecond {
		t.Fatalf("fallback check after %v, before 4 intervals", el)
	}
	if f.srv.calls.Load() != 1 || b.State() != gobreaker.StateOpen {
		t.Fatalf("calls %d, state %v", f.srv.calls.Load(), b.State())
	}
	f.owner.Store("n1")
	testwait.For(t, 10*time.Second, "owner checks", func() bool { return f.checks(RoleOwner, ResultFail) >= 2 })
}

// A health URL the allowlist refuses is never called and counts as a
// failed check: the breaker stays open on its lease.
func TestRefusedByAllowlist(t *testing.T) {
	f := newFixture(t, Config{}, func(context.Context, breakerpool.Key, string) error {
		return errors.New("not in the allowlist")
	})
	f.srv.healthy.Store(true)
	b := f.pool.Get(key)
	b.OpenFor(100*time.Millisecond, breakerpool.SourceLocal)
	testwait.For(t, 10*time.Second, "refused checks", func() bool { return f.checks(RoleOwner, ResultRefused) >= 2 })
	if f.srv.calls.Load() != 0 || b.State() != gobreaker.StateOpen {
		t.Fatalf("calls %d, state %v", f.srv.calls.Load(), b.State())
	}
}

// A check that cannot connect is an error named by its kind, never by the
// URL's text: a health URL's query may hold a secret, and the result is
// shown on the status page and in the breaker list.
func TestUnreachableCheckNamesTheErrorNotTheURL(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close() // nothing listens there now: connections are refused
	c := *f.check.Load()
	c.URL = "http://" + closed + "/health?token=s3cret"
	f.check.Store(&c)
	b := f.pool.Get(key)
	b.OpenFor(100*time.Millisecond, breakerpool.SourceLocal)
	testwait.For(t, 10*time.Second, "a failed check", func() bool { return f.checks(RoleOwner, ResultError) >= 1 })
	r, ok := f.prober.Last(key)
	if !ok || r.Result != ResultError || r.Error != "connection refused" || strings.Contains(r.Error, "s3cret") {
		t.Fatalf("last result %+v; want an error named \"connection refused\"", r)
	}
	if b.State() != gobreaker.StateOpen {
		t.Fatalf("state %v after failed checks, want open", b.State())
	}
}

// The lease is what holds the breaker: a prober that stops leaves it to its
// own open timer, so it probes with a real call again (never stuck open).
func TestStoppedProberLeavesBreakerToItsTimer(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	b := f.pool.Get(key)
	b.OpenFor(100*time.Millisecond, breakerpool.SourceLocal)
	testwait.For(t, 10*time.Second, "a failed check", func() bool { return f.checks(RoleOwner, ResultFail) >= 1 })
	f.prober.Close()
	testwait.For(t, 10*time.Second, "half-open on its own timer", func() bool { return b.State() == gobreaker.StateHalfOpen })
	if st := b.Status(); st.Source != breakerpool.SourceLocal {
		t.Fatalf("source %v", st.Source)
	}
}

// Operator-forced opens are left alone: no call, no extension.
func TestForcedOpenIgnored(t *testing.T) {
	f := newFixture(t, Config{}, nil)
	b := f.pool.Get(key)
	b.OpenFor(300*time.Millisecond, breakerpool.SourceOperator)
	testwait.For(t, 10*time.Second, "the forced period to end", func() bool { return b.State() == gobreaker.StateHalfOpen })
	if f.srv.calls.Load() != 0 {
		t.Fatalf("%d health calls on a forced open", f.srv.calls.Load())
	}
}

// CheckNow answers a confirm round with a health call instead of a task:
// failing, the paused breaker goes half-open and straight back to open
// (source local: what peers read as a failed probe) with no call admitted;
// passing, it warm-starts (half-open, source health) so the next real call
// decides. A key without a health check is left to a task probe (false).
func TestCheckNowAnswersAConfirmRound(t *testing.T) {
	f := newFixture(t, Config{FallbackIntervals: 1000}, nil)
	f.owner.Store("n2") // not the owner: only CheckNow calls
	b := f.pool.Get(key)
	b.OpenFor(time.Hour, breakerpool.SourceHint) // the confirm pause
	gen := b.Generation()
	if !f.prober.CheckNow(key) {
		t.Fatal("CheckNow refused a key with a health check")
	}
	testwait.For(t, 10*time.Second, "a failed confirm check", func() bool { return f.checks(RoleConfirm, ResultFail) == 1 })
	testwait.For(t, 10*time.Second, "the breaker failed by the check", func() bool { return b.Generation() == gen+2 })
	if st := b.Status(); st.State != gobreaker.StateOpen || st.Source != breakerpool.SourceLocal {
		t.Fatalf("after a failed confirm check: %v/%v, want open/local", st.State, st.Source)
	}

	f.srv.healthy.Store(true)
	b.OpenFor(time.Hour, breakerpool.SourceHint)
	if !f.prober.CheckNow(key) {
		t.Fatal("CheckNow refused")
	}
	testwait.For(t, 10*time.Second, "half-open after a passed confirm check", func() bool { return b.State() == gobreaker.StateHalfOpen })
	if st := b.Status(); st.Source != breakerpool.SourceHealth {
		t.Fatalf("half-open source %v, want health", st.Source)
	}
	if f.checks(RoleConfirm, ResultPass) != 1 || f.srv.calls.Load() != 2 {
		t.Fatalf("confirm passes %v, health calls %d", f.checks(RoleConfirm, ResultPass), f.srv.calls.Load())
	}

	other := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns", Destination: "no-check"}
	f.pool.Get(other).OpenFor(time.Hour, breakerpool.SourceHint)
	if f.prober.CheckNow(other) {
		t.Fatal("CheckNow took a key without a health check")
	}
}
