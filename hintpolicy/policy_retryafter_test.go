package hintpolicy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// TestPolicyRetryAfterFleetWide: one node of three gets a 429 with
// Retry-After; its peers (which had used the destination) hold off until
// the same moment, whatever the hint policy, so the destination sees that
// one call and nothing else before its deadline. Then it recovers.
func TestPolicyRetryAfterFleetWide(t *testing.T) {
	for _, pol := range []breakerpool.HintPolicy{breakerpool.HintProbe, breakerpool.HintOff, breakerpool.HintConfirm} {
		t.Run(string(pol), func(t *testing.T) {
			dest := transporttest.NewDestination(t)
			if err := dest.SetMode(transporttest.ModeTooManyRequests); err != nil {
				t.Fatal(err)
			}
			dest.SetRetryAfter("2")
			// Timeout 30 s: any opening that is not the Retry-After's would
			// outlast the test.
			nodes := startPCluster(t, 3, testSettings(pol, 30*time.Second), Config{})
			setURL(dest.CallbackURL(), nodes...)
			client := newClient(t)
			k := testKey("ra-" + string(pol))
			for _, n := range nodes[1:] {
				n.pool.Get(k)
			}
			if err := nodes[0].call(client, k); err == nil || breakerpool.IsCircuitBreakerOpen(err) {
				t.Fatalf("first call: %v, want the 429", err)
			}
			s0 := status(nodes[0], k)
			if s0.State != gobreaker.StateOpen || s0.RetryAfterUntil == nil {
				t.Fatalf("origin: %+v, want open with a Retry-After deadline", s0)
			}
			until := s0.RetryAfterUntil.Truncate(time.Millisecond) // as gossiped
			testwait.For(t, 10*time.Second, "peers to hold off until the same moment", func() bool {
				for _, n := range nodes[1:] {
					s := status(n, k)
					if s.State != gobreaker.StateOpen || s.RetryAfterUntil == nil || !s.RetryAfterUntil.Equal(until) {
						return false
					}
				}
				return true
			})
			if got := testutil.ToFloat64(nodes[0].pol.met.published.WithLabelValues(PublishRetryAfter)); got != 1 {
				t.Fatalf("retry_after hints published = %v, want 1", got)
			}
			for _, n := range nodes[1:] {
				if got := actions(t, n, ActionRetryAfter); got != 1 {
					t.Fatalf("%s: retry_after actions = %v, want 1", n.id, got)
				}
			}
			// Anti-entropy re-sends the deadline to joiners.
			if hs := nodes[0].pol.OpenHints(); len(hs) != 1 || !hs[0].RetryUntil.Equal(until) {
				t.Fatalf("OpenHints = %+v, want one carrying %v", hs, until)
			}

			drivers := make([]*driver, 0, len(nodes))
			for _, n := range nodes {
				drivers = append(drivers, drive(t, n, client, k, 20))
			}
			testwait.For(t, 10*time.Second, "the Retry-After deadline to pass", func() bool { return time.Now().After(s0.RetryAfterUntil.Add(50 * time.Millisecond)) })
			if err := dest.SetMode(transporttest.ModeUp); err != nil {
				t.Fatal(err)
			}
			before := 0
			for _, c := range dest.Calls() {
				if c.At.Before(until) {
					before++
				}
			}
			if before != 1 {
				t.Fatalf("%d calls reached the destination before its Retry-After deadline, want 1", before)
			}
			for _, d := range drivers {
				if d.blocked.Load() == 0 {
					t.Fatalf("%s: no call was held off", d.n.id)
				}
			}
			testwait.For(t, 20*time.Second, "every node to deliver after the deadline", func() bool {
				for _, d := range drivers {
					if !d.deliveredSince(until) {
						return false
					}
				}
				return true
			})
		})
	}
}

// TestPolicyRetryAfterReceiverCap: the receiver caps a gossiped deadline
// by its own MaxRetryAfter; with MaxRetryAfter 0, or a deadline already
// past, the hint is an ordinary open hint (probe: guard).
func TestPolicyRetryAfterReceiverCap(t *testing.T) {
	s := testSettings(breakerpool.HintProbe, time.Minute)
	s.MaxRetryAfter = breakerpool.Duration(time.Second)
	n := startPNode(t, "n0", s, Config{})

	k := testKey("far")
	n.pool.Get(k)
	far := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	n.pol.HandleHint(cluster.Hint{Key: k, State: cluster.HintOpen, Generation: 1, Origin: "a", OpenFor: time.Minute, RetryUntil: far})
	st := status(n, k)
	if st.State != gobreaker.StateOpen || st.Source != breakerpool.SourceHint || st.OpenRemaining > time.Second {
		t.Fatalf("capped: %+v, want open from the hint for at most 1s", st)
	}
	if st.RetryAfterUntil == nil || st.RetryAfterUntil.After(time.Now().Add(time.Second)) {
		t.Fatalf("capped deadline %v, want within 1s", st.RetryAfterUntil)
	}

	past := testKey("past")
	n.pool.Get(past)
	n.pol.HandleHint(cluster.Hint{Key: past, State: cluster.HintOpen, Generation: 1, Origin: "a", OpenFor: time.Minute,
		RetryUntil: time.Now().Add(-time.Second)})
	if st := status(n, past); st.State != gobreaker.StateClosed || st.Mode != breakerpool.ModeGuarded {
		t.Fatalf("past deadline: %+v, want the probe policy's guard", st)
	}

	off := testKey("feature-off")
	s.MaxRetryAfter = 0
	n.setSettings(t, off.Destination, s)
	n.pool.Get(off)
	n.pol.HandleHint(cluster.Hint{Key: off, State: cluster.HintOpen, Generation: 1, Origin: "a", OpenFor: time.Minute, RetryUntil: far})
	if st := status(n, off); st.State != gobreaker.StateClosed || st.Mode != breakerpool.ModeGuarded {
		t.Fatalf("MaxRetryAfter 0: %+v, want the probe policy's guard", st)
	}
	if got := actions(t, n, ActionRetryAfter); got != 1 {
		t.Fatalf("retry_after actions = %v, want 1", got)
	}
}
