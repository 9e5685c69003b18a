package hintpolicy

import (
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
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
