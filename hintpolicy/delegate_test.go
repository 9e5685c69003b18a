package hintpolicy

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// delegatingVia is n's active delegation for k ("" if none), read from its
// state (DelegateVia also hands out peer probes).
func delegatingVia(n *pnode, k breakerpool.Key) string {
	n.pol.mu.Lock()
	defer n.pol.mu.Unlock()
	if st, ok := n.pol.keys[k]; ok {
		return st.deleg.via
	}
	return ""
}

// peerQueue plays the queue's part for one node and key: every tick, while
// the node's breaker refuses calls, it asks DelegateVia and reports the
// call it would have made through the peer with answer(peer).
type peerQueue struct {
	asked atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
}

func runPeerQueue(t *testing.T, n *pnode, k breakerpool.Key, answer func(peer string) DelegateResult) *peerQueue {
	q := &peerQueue{stop: make(chan struct{})}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-q.stop:
				return
			case <-tick.C:
			}
			if status(n, k).State == gobreaker.StateClosed {
				continue
			}
			if peer, ok := n.pol.DelegateVia(k); ok {
				q.asked.Add(1)
				n.pol.DelegateOutcome(k, peer, answer(peer))
			}
		}
	}()
	t.Cleanup(func() { close(q.stop); q.wg.Wait() })
	return q
}

// sickCluster starts size nodes under confirm (Timeout 1 s) whose calls for
// k go to dest, but n0's to a refusing address (its egress is broken), each
// driven at 20 calls a second.
func sickCluster(t *testing.T, size int, cfg Config) ([]*pnode, *transporttest.Destination, breakerpool.Key) {
	t.Helper()
	dest := transporttest.NewDestination(t)
	broken := transporttest.NewDestination(t)
	if err := broken.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	nodes := startPCluster(t, size, testSettings(breakerpool.HintConfirm, time.Second), cfg)
	setURL(dest.CallbackURL(), nodes[1:]...)
	setURL(broken.CallbackURL(), nodes[0])
	client := newClient(t)
	k := testKey("healthy")
	for _, n := range nodes {
		drive(t, n, client, k, 20)
	}
	return nodes, dest, k
}

// TestSickNodeDelegatesThroughAPeer: n0's own egress fails every call while
// its peers' pass. Once its breaker trips, its refused calls go through a
// peer (OnDelegate is told); the peers never delegate. Once n0's egress
// heals, its own probe closes its breaker and the delegation ends.
func TestSickNodeDelegatesThroughAPeer(t *testing.T) {
	var told atomic.Int32
	cfg := confirmTestCfg
	cfg.OnDelegate = func(breakerpool.Key) { told.Add(1) }
	nodes, dest, k := sickCluster(t, 3, cfg)
	runPeerQueue(t, nodes[0], k, func(string) DelegateResult { return DelegateReached })
	var via string
	testwait.For(t, 15*time.Second, "n0 to make its calls through a peer", func() bool {
		via = delegatingVia(nodes[0], k)
		return via != ""
	})
	if via != "n1" && via != "n2" {
		t.Fatalf("delegating through %q, want a peer", via)
	}
	if told.Load() == 0 || actions(t, nodes[0], ActionDelegate) == 0 {
		t.Fatalf("OnDelegate told %d times, delegate actions %v", told.Load(), actions(t, nodes[0], ActionDelegate))
	}
	if got, ok := nodes[0].pol.DelegateVia(k); !ok || got != via {
		t.Fatalf("DelegateVia = %q, %v; want %s", got, ok, via)
	}
	for _, n := range nodes[1:] {
		if got, ok := n.pol.DelegateVia(k); ok || actions(t, n, ActionDelegate) != 0 {
			t.Fatalf("%s delegates through %q, but its own calls pass", n.id, got)
		}
	}

	setURL(dest.CallbackURL(), nodes[0]) // n0's egress heals
	testwait.For(t, 15*time.Second, "n0's own probe to close its breaker", func() bool {
		return status(nodes[0], k).State == gobreaker.StateClosed
	})
	if got := delegatingVia(nodes[0], k); got != "" {
		t.Fatalf("n0's breaker is closed, yet it delegates through %s", got)
	}
}

// TestDelegationEndsWhenThePeerFails: a call through the peer that failed
// at the destination ends the delegation; a peer that cannot be reached
// is avoided and another probed; so is one that crashed; the peer's own
// failure report ends it.
func TestDelegationEndsWhenThePeerFails(t *testing.T) {
	nodes, _, k := sickCluster(t, 4, confirmTestCfg)
	var mu sync.Mutex
	unreachable := map[string]bool{}
	asked := map[string]int{}
	runPeerQueue(t, nodes[0], k, func(peer string) DelegateResult {
		mu.Lock()
		defer mu.Unlock()
		asked[peer]++
		if unreachable[peer] {
			return DelegateUnreachable
		}
		return DelegateReached
	})
	waitVia := func(what string) string {
		var via string
		testwait.For(t, 15*time.Second, what, func() bool {
			via = delegatingVia(nodes[0], k)
			return via != ""
		})
		return via
	}
	via := waitVia("n0 to delegate")

	// The destination fails for the peer too: over.
	nodes[0].pol.DelegateOutcome(k, via, DelegateDown)
	if got := delegatingVia(nodes[0], k); got != "" {
		t.Fatalf("a call through %s failed at the destination, yet n0 delegates through %s", via, got)
	}

	// Started again by the next peer probe after n0's next local opening;
	// this time the peer cannot be reached: the other one is probed.
	via = waitVia("n0 to delegate again")
	mu.Lock()
	unreachable[via] = true
	mu.Unlock()
	nodes[0].pol.DelegateOutcome(k, via, DelegateUnreachable)
	other := waitVia("n0 to delegate through another peer")
	if other == via {
		t.Fatalf("still delegating through %s, which cannot be reached", via)
	}

	// The peer in use crashes: once it is not alive, the next refused
	// call probes the last one.
	for _, n := range nodes {
		if n.id == other {
			n.crash()
		}
	}
	var third string
	testwait.For(t, 20*time.Second, "n0 to delegate through the last peer", func() bool {
		third = delegatingVia(nodes[0], k)
		return third != "" && third != other && third != via
	})

	// The peer in use reports the destination failing: over.
	p := nodes[0].pol
	p.HandleHint(cluster.Hint{Key: k, State: cluster.HintFailing, Generation: clockOf(nodes[0], k) + 10, Origin: third, OpenFor: time.Second})
	if got := delegatingVia(nodes[0], k); got == third {
		t.Fatalf("%s reported the destination failing, yet n0 still delegates through it", third)
	}
}

// TestDeadDestinationIsNotDelegated: a destination down for everyone is
// never worked around. Each node's local openings hand a peer probe out at
// most once per window; the peers' breakers, open too, refuse it; no node
// delegates, through the outage and after its recovery.
func TestDeadDestinationIsNotDelegated(t *testing.T) {
	const window = time.Second // the breakers' Timeout
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	nodes := startPCluster(t, 3, testSettings(breakerpool.HintConfirm, window), confirmTestCfg)
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(t)
	k := testKey("dead")
	start := time.Now()
	var qs []*peerQueue
	for _, n := range nodes {
		drive(t, n, client, k, 20)
		qs = append(qs, runPeerQueue(t, n, k, func(string) DelegateResult { return DelegateDown }))
	}
	testwait.For(t, 15*time.Second, "every breaker to open", func() bool {
		for _, n := range nodes {
			if !isOpen(n, k) {
				return false
			}
		}
		return true
	})
	testwait.For(t, 15*time.Second, "a peer probe to be handed out", func() bool {
		for _, q := range qs {
			if q.asked.Load() > 0 {
				return true
			}
		}
		return false
	})
	check := func(when string) {
		t.Helper()
		bound := int64(time.Since(start)/window) + 1
		for i, n := range nodes {
			if via := delegatingVia(n, k); via != "" || actions(t, n, ActionDelegate) != 0 {
				t.Fatalf("%s: %s: delegating through %q (%v)", n.id, when, via, actions(t, n, ActionDelegate))
			}
			if got := qs[i].asked.Load(); got > bound {
				t.Fatalf("%s: %s: %d peer probes, want at most one per window (%d)", n.id, when, got, bound)
			}
		}
	}
	check("during the outage")
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "every breaker to close after the recovery", func() bool {
		for _, n := range nodes {
			if status(n, k).State != gobreaker.StateClosed {
				return false
			}
		}
		return true
	})
	check("after the recovery")
}
