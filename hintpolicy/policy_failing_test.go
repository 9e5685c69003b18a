package hintpolicy

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

func published(n *pnode, result string) float64 {
	return testutil.ToFloat64(n.pol.met.published.WithLabelValues(result))
}

// fail reports one failed call through b.
func fail(t testing.TB, b *breakerpool.Breaker) {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("%s: call rejected: %v", b.Name(), err)
	}
	done(false)
}

// TestPolicyFailingPublish: a local streak of WarnAfter failures publishes
// one failing hint with the next generation (the wall clock's milliseconds
// for a fresh key: nextGeneration); the rest of the streak
// publishes nothing more, a new streak within Timeout is rate-limited, and
// the trip still publishes its open hint.
func TestPolicyFailingPublish(t *testing.T) {
	n := startPNode(t, "n0", testSettings(breakerpool.HintProbe, 10*time.Second), Config{})
	k := testKey("failing")
	b := n.pool.Get(k)
	before := uint64(time.Now().UnixMilli())
	fail(t, b)
	fail(t, b)
	testwait.For(t, 5*time.Second, "the failing hint", func() bool { return published(n, PublishFailing) == 1 })
	failingGen := clockOf(n, k)
	if failingGen < before || failingGen > uint64(time.Now().UnixMilli()) {
		t.Fatalf("clock %d after the failing hint, want the publication's time in ms (≥ %d)", failingGen, before)
	}
	if hs := n.pol.OpenHints(); len(hs) != 0 {
		t.Fatalf("a failing hint went to anti-entropy: %+v", hs)
	}
	fail(t, b) // same streak
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(true) // ends the streak
	fail(t, b)
	fail(t, b) // a new streak, within Timeout of the last publication
	testwait.For(t, 5*time.Second, "the rate limit", func() bool { return published(n, PublishFailingRateLimited) == 1 })
	for range 4 {
		fail(t, b) // 6 consecutive: trips
	}
	testwait.For(t, 5*time.Second, "the open hint", func() bool { return published(n, PublishOpen) == 1 })
	if got := published(n, PublishFailing); got != 1 {
		t.Fatalf("failing hints published = %v, want 1", got)
	}
	if hs := n.pol.OpenHints(); len(hs) != 1 || hs[0].Generation <= failingGen || hs[0].State != cluster.HintOpen {
		t.Fatalf("OpenHints = %+v, want the open hint after the failing hint's generation %d", hs, failingGen)
	}
}

// TestPolicyFailingReceive: what each policy does with a peer's failing
// hint, and that the open-hint rules (Lamport order, suspect origins,
// precreate) hold for it too.
func TestPolicyFailingReceive(t *testing.T) {
	for _, pol := range []breakerpool.HintPolicy{breakerpool.HintOff, breakerpool.HintProbe, breakerpool.HintAdopt} {
		t.Run(string(pol), func(t *testing.T) {
			n := startPNode(t, "n0", testSettings(pol, 10*time.Second), Config{})
			k := testKey("dest")
			b := n.pool.Get(k)
			fail(t, b) // this node is failing for the key too: it still guards
			if !n.pol.HandleHint(cluster.Hint{Key: k, State: cluster.HintFailing, Generation: 3, Origin: "a"}) {
				t.Fatal("a new failing hint is not fresh")
			}
			s := b.Status()
			if pol == breakerpool.HintOff {
				if s.Mode != breakerpool.ModeAuto || actions(t, n, ActionRecorded) != 1 {
					t.Fatalf("off: %+v, recorded %v", s, actions(t, n, ActionRecorded))
				}
				return
			}
			if s.State != gobreaker.StateClosed || s.Mode != breakerpool.ModeGuarded || s.Source != breakerpool.SourceHint {
				t.Fatalf("%s: want closed, guarded by a hint; got %+v", pol, s)
			}
			if actions(t, n, ActionGuardFailing) != 1 || probes(t, n, ProbeGuard) != 1 {
				t.Fatal("guard_failing / probe role guard not counted")
			}
			if n.pol.HandleHint(cluster.Hint{Key: k, State: cluster.HintFailing, Generation: 2, Origin: "b"}) {
				t.Fatal("stale failing hint reported fresh")
			}
			// The guard admits one probe until it resolves.
			done, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Allow(); !breakerpool.IsCircuitBreakerOpen(err) {
				t.Fatalf("second call while the probe is in flight: err = %v, want a rejection", err)
			}
			// Now the origin's open hint: adopt opens the guarded breaker,
			// probe leaves the guard in place.
			n.pol.HandleHint(cluster.Hint{Key: k, State: cluster.HintOpen, Generation: 4, Origin: "a", OpenFor: 5 * time.Second})
			s = b.Status()
			switch pol {
			case breakerpool.HintAdopt:
				if s.State != gobreaker.StateOpen || s.Source != breakerpool.SourceHint || actions(t, n, ActionAdopt) != 1 {
					t.Fatalf("adopt: open hint on a hint-guarded breaker: %+v", s)
				}
			case breakerpool.HintProbe:
				if s.State != gobreaker.StateClosed || s.Mode != breakerpool.ModeGuarded {
					t.Fatalf("probe: %+v", s)
				}
				done(true) // the probe succeeds: the guard lifts
				if s := b.Status(); s.Mode != breakerpool.ModeAuto {
					t.Fatalf("probe: guard not lifted by a success: %+v", s)
				}
				return
			}
			done(true)
			// A failing hint never touches an open breaker (no open time,
			// no hold extension), even from the probe owner.
			before := b.Status()
			n.pol.HandleHint(cluster.Hint{Key: k, State: cluster.HintFailing, Generation: 5, Origin: n.pol.Owner(k)})
			if after := b.Status(); after.State != gobreaker.StateOpen || after.Generation != before.Generation ||
				after.OpenRemaining > before.OpenRemaining {
				t.Fatalf("failing hint changed an open breaker: %+v → %+v", before, after)
			}
		})
	}
}

func TestPolicyFailingSuspectAndPrecreate(t *testing.T) {
	n := startPNode(t, "n0", testSettings(breakerpool.HintProbe, 10*time.Second), Config{MaxPrecreated: 2})
	if n.pol.HandleHint(cluster.Hint{Key: testKey("s"), State: cluster.HintFailing, Generation: 1, Origin: "a", Suspect: true}) {
		t.Fatal("failing hint flagged suspect reported fresh")
	}
	if _, ok := n.pool.Lookup(testKey("s")); ok || actions(t, n, ActionIgnoredSuspect) != 1 {
		t.Fatal("a suspect failing hint was acted on")
	}
	for i := range 5 {
		n.pol.HandleHint(cluster.Hint{Key: testKey(fmt.Sprint("u", i)), State: cluster.HintFailing, Generation: 1, Origin: "a"})
	}
	if got := n.pool.Len(); got != 2 || actions(t, n, ActionSkipUnknown) != 3 {
		t.Fatalf("pool %d breakers, skipped %v: want the precreate bound 2 and 3 skipped", got, actions(t, n, ActionSkipUnknown))
	}
	if s := status(n, testKey("u0")); s.Mode != breakerpool.ModeGuarded {
		t.Fatalf("precreated breaker not guarded: %+v", s)
	}
}

// TestPolicySimultaneousOutageCost is the early warning's purpose: N = 5
// nodes each calling a destination at 20/s; it dies for all of them at the
// same moment. Without hints every node pays its own FailureThreshold
// (5 × 6 = 30 calls, BenchmarkDeadDestination); with them the first node to
// see WarnAfter failures makes every peer guard, so each stops at its next
// failure. The bound asserted is only that hints beat no hints (fewer than
// N × FailureThreshold calls): the count depends on how the 5 drivers are
// scheduled, and a loaded machine made a tighter bound (4N) flake; the
// figure is logged, and BenchmarkDeadDestinationGrowth measures it.
func TestPolicySimultaneousOutageCost(t *testing.T) {
	const size = 5
	for _, pol := range []breakerpool.HintPolicy{breakerpool.HintProbe, breakerpool.HintAdopt} {
		t.Run(string(pol), func(t *testing.T) {
			dest := transporttest.NewDestination(t)
			nodes := startPCluster(t, size, testSettings(pol, 10*time.Second), Config{})
			setURL(dest.CallbackURL(), nodes...)
			client := newClient(t)
			k := testKey("dies-for-all")
			driveAll(t, nodes, client, k, 20)
			if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
				t.Fatal(err)
			}
			start := dest.Count("")
			testwait.For(t, 10*time.Second, "every node to open", func() bool {
				for _, n := range nodes {
					if !isOpen(n, k) {
						return false
					}
				}
				return true
			})
			got := dest.Count("") - start
			var failing float64
			for _, n := range nodes {
				failing += published(n, PublishFailing)
			}
			t.Logf("policy %s: %d calls reached the destination until all %d nodes were open (off: %d); %v failing hints",
				pol, got, size, size*breakerpool.DefaultFailureThreshold, failing)
			if failing == 0 {
				t.Fatal("no node published a failing hint")
			}
			if off := size * breakerpool.DefaultFailureThreshold; got >= off {
				t.Fatalf("policy %s: %d calls until the fleet was open, want fewer than without hints (%d)", pol, got, off)
			}
		})
	}
}
