package hintpolicy

import (
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// A key's second outage is shared like its first. Between them every node
// forgot the key's state (closed and idle for KeyIdleTTL), so its
// generations started again; numbered from 1, the origin's hints were
// below what its peers — and the gossip layer's dedup per origin, which
// never forgets — had seen in the first outage, and were dropped as stale:
// every peer paid its own trip again. Numbered by time, they arrive.
func TestSecondOutageAfterKeyForgotten(t *testing.T) {
	dest := transporttest.NewDestination(t)
	nodes := startPCluster(t, 3, testSettings(breakerpool.HintAdopt, 500*time.Millisecond),
		Config{KeyIdleTTL: 300 * time.Millisecond, Tick: 50 * time.Millisecond})
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	k := keyOwnedBy(t, nodes[0], "n0")
	for _, n := range nodes {
		if err := n.call(client, k); err != nil {
			t.Fatal(err)
		}
	}
	outage := func(episode string) {
		t.Helper()
		if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
			t.Fatal(err)
		}
		tripLocally(t, nodes[0], client, k)
		testwait.For(t, 10*time.Second, episode+": every peer to adopt n0's open hint", func() bool {
			for _, n := range nodes[1:] {
				if s := status(n, k); s.State == gobreaker.StateClosed && s.Mode == breakerpool.ModeAuto {
					return false
				}
			}
			return true
		})
		if err := dest.SetMode(transporttest.ModeUp); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 15*time.Second, episode+": every breaker to close", func() bool {
			all := true
			for _, n := range nodes {
				if s := status(n, k); s.State != gobreaker.StateClosed || s.Mode != breakerpool.ModeAuto {
					_ = n.call(client, k)
					all = false
				}
			}
			return all
		})
	}
	outage("first outage")
	testwait.For(t, 10*time.Second, "every node to forget the key", func() bool {
		for _, n := range nodes {
			n.pol.mu.Lock()
			_, ok := n.pol.keys[k]
			n.pol.mu.Unlock()
			if ok {
				return false
			}
		}
		return true
	})
	outage("second outage")
}

// A destination's Retry-After is the moment every node resumes, also when
// the key's probe owner has no traffic for it. The other nodes held such an
// opening like a trip (Timeout × [2, 2.5)) waiting for the owner's closed
// hint, which an idle owner never sends: with a 20 s Timeout, a 1 s
// Retry-After kept them off for 40 s or more.
func TestRetryAfterNotHeldForAnIdleOwner(t *testing.T) {
	const timeout = 20 * time.Second
	dest := transporttest.NewDestination(t)
	nodes := startPCluster(t, 3, testSettings(breakerpool.HintProbe, timeout), Config{})
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	k := keyOwnedBy(t, nodes[0], "n2")
	drivers := driveAll(t, nodes[:2], client, k, 20) // n2, the owner, has no traffic
	dest.SetRetryAfter("1")
	if err := dest.SetMode(transporttest.ModeTooManyRequests); err != nil {
		t.Fatal(err)
	}
	var until time.Time
	testwait.For(t, 5*time.Second, "a Retry-After opening", func() bool {
		for _, n := range nodes[:2] {
			if s := status(n, k); s.RetryAfterUntil != nil {
				until = *s.RetryAfterUntil
				return true
			}
		}
		return false
	})
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	for i, d := range drivers {
		// Well before a hold's end (40 s at the earliest).
		testwait.For(t, time.Until(until)+10*time.Second, fmt.Sprintf("n%d to deliver after the Retry-After deadline", i),
			func() bool { return d.deliveredSince(until) })
	}
}

// The designated peer's confirmation probe is one probe: counted as
// role="confirm" when asked, not again as "warm" when its half-open
// transition (source hint) reaches the policy, though no closed hint came.
func TestConfirmProbeCountedOnce(t *testing.T) {
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	nodes := startPCluster(t, 3, testSettings(breakerpool.HintConfirm, 10*time.Second), confirmTestCfg)
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	k := testKey("dead")
	for _, n := range nodes[1:] {
		n.pool.Get(k)
	}
	d := nodeByID(nodes, designatedFor(nodes[1], k, "n0"))
	_ = nodes[0].call(client, k)
	testwait.For(t, 5*time.Second, "the designated peer's half-open transition to reach its policy", func() bool {
		d.pol.mu.Lock()
		defer d.pol.mu.Unlock()
		st, ok := d.pol.keys[k]
		return ok && st.local == gobreaker.StateHalfOpen
	})
	if c, w := probes(t, d, ProbeConfirm), probes(t, d, ProbeWarm); c != 1 || w != 0 {
		t.Fatalf("one confirmation probe counted confirm=%v warm=%v, want 1 and 0", c, w)
	}
}

// A breaker an open hint created and no call used is evicted as stale
// without a transition. Its key's state, last seen open, was then never
// idle and never forgotten, so the key table filled with such keys; and a
// hint handled with a transient state (the table full) took a precreate
// slot nothing could give back, until every new key's hint was skipped.
func TestEvictedHintBreakerLeavesNoState(t *testing.T) {
	n := startPNode(t, "n0", testSettings(breakerpool.HintAdopt, time.Minute),
		Config{MaxKeys: 1, MaxPrecreated: 4, KeyIdleTTL: 50 * time.Millisecond, Tick: 20 * time.Millisecond})
	k := testKey("one-off")
	if !n.pol.HandleHint(cluster.Hint{Key: k, State: cluster.HintOpen, Generation: 1, Origin: "peer", OpenFor: time.Minute}) {
		t.Fatal("open hint not handled")
	}
	testwait.For(t, 5*time.Second, "the precreated breaker to open", func() bool { return isOpen(n, k) })
	// Full table: a second key's hint is handled with a transient state.
	other := testKey("transient")
	n.pol.HandleHint(cluster.Hint{Key: other, State: cluster.HintOpen, Generation: 1, Origin: "peer", OpenFor: time.Minute})
	now := time.Now()
	n.pool.EvictIdle(now.Add(time.Hour))                   // clears the use flags
	n.pool.EvictIdle(now.Add(time.Hour + 30*24*time.Hour)) // stale: evicted whatever its state
	if _, ok := n.pool.Lookup(k); ok {
		t.Fatal("the breaker was not evicted")
	}
	testwait.For(t, 5*time.Second, "the key's state to be forgotten and every precreate slot given back", func() bool {
		n.pol.mu.Lock()
		defer n.pol.mu.Unlock()
		_, kept := n.pol.keys[k]
		return !kept && n.pol.precreated == 0
	})
}

// A key's probe owner is chosen among the nodes whose own calls opened it,
// so a destination that comes back is probed at Timeout by a node that has
// calls for it. Hashed over every member, the owner here was n2, which has
// no calls for the key: it never probed nor sent the closed hint, and n0
// and n1 held their breakers open for their whole fallback (Timeout × [2,
// 2.5) after their opening) before probing themselves. Now one of them owns
// the probe, the other holds for it and warm-starts on its closed hint: one
// probe, no fallback.
func TestRecoveryNotHeldForAnIdleOwner(t *testing.T) {
	const timeout = 5 * time.Second
	dest := transporttest.NewDestination(t)
	nodes := startPCluster(t, 3, testSettings(breakerpool.HintProbe, timeout), Config{})
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	k := keyOwnedBy(t, nodes[0], "n2")
	drivers := driveAll(t, nodes[:2], client, k, 20) // n2, the owner over every member, has no calls
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "n0 and n1 open", func() bool { return isOpen(nodes[0], k) && isOpen(nodes[1], k) })
	opened := time.Now() // at or after both openings
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	// The owner probes at Timeout × [1, 1.2) after its opening; a fallback
	// would be at 2 × Timeout at the earliest.
	for i, d := range drivers {
		testwait.For(t, time.Until(opened.Add(timeout*17/10)), fmt.Sprintf("n%d to deliver before any fallback", i),
			func() bool { return d.deliveredSince(opened) })
	}
	var owner, fallback float64
	for _, n := range nodes[:2] {
		owner += probes(t, n, ProbeOwner)
		fallback += probes(t, n, ProbeFallback)
	}
	if owner != 1 || fallback != 0 {
		t.Fatalf("probes: %v by the owner and %v at a fallback, want 1 and 0", owner, fallback)
	}
}
