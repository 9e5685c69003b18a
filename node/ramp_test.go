package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Issue 19 §2 across a real 3-node cluster (real Raft, real memberlist):
// after an outage the probe owner's close and its recovery hint start a
// ramp on every node, and the fleet sends the released backlog at
// rampStartRPS in the first second (plus, per node, its one probe and one
// saved token), where without the ramp every task would go at once.
func TestRecoveryRampAcrossFleet(t *testing.T) {
	const tasks, start = 60, 6
	dest := transporttest.NewDestination(t)
	c := newTestCluster(t, 3, nil)
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	setConfig(t, c.nodes, dynconfig.KeyBreakerSettings, host, `{"Timeout":"1s"}`)
	setConfig(t, c.nodes, dynconfig.KeyRampStartRPS, host, fmt.Sprint(start))
	setConfig(t, c.nodes, dynconfig.KeyRampDuration, host, `"3s"`)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	sub := newSubmitter(t, c.nodes)
	var ids []string
	for i := range tasks {
		id, err := sub.submit(callbackTask(dest.CallbackURL(), fmt.Sprintf("wf-ramp-%d", i), fmt.Sprintf("ramp-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: deliveryNS, Destination: host}
	opened := make([]bool, len(c.nodes))
	testwait.For(t, 30*time.Second, "every node's breaker opened", func() bool {
		all := true
		for i, n := range c.nodes {
			if b, ok := n.pool.Lookup(key); ok && b.State() == gobreaker.StateOpen {
				opened[i] = true
			}
			all = all && opened[i]
		}
		return all
	})
	for i, n := range c.nodes {
		if _, ok := n.deliver.queue.Ramp(key); ok {
			t.Fatalf("node %d ramping before the recovery", i)
		}
	}
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()

	ramped := make([]bool, len(c.nodes))
	var lastSeen string // each node's breaker and ramp at the last poll, logged on failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("at the last poll: %s", lastSeen)
		}
	})
	testwait.For(t, 30*time.Second, "every node's close to start its ramp", func() bool {
		all := true
		lastSeen = ""
		for i, n := range c.nodes {
			if b, ok := n.pool.Lookup(key); ok {
				lastSeen += fmt.Sprintf("[node %d: breaker %v, ramped %v] ", i, b.State(), ramped[i])
			} else {
				lastSeen += fmt.Sprintf("[node %d: no breaker, ramped %v] ", i, ramped[i])
			}
			if st, ok := n.deliver.queue.Ramp(key); ok {
				ramped[i] = true
				if want := float64(start) / float64(len(c.nodes)); st.StartRPS != want {
					t.Fatalf("node %d starts at %v calls/s, want its third of %d", i, st.StartRPS, start)
				}
			}
			all = all && ramped[i]
		}
		return all
	})
	// The last node's ramp has just begun: the cluster's breaker list shows it.
	list, err := c.nodes[0].client().Breakers(ctxT(t), true)
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, b := range list.Breakers {
		if b.Ramp != nil && b.Destination == host {
			shown++
			if b.Ramp.StartRPS != float64(start)/3 || b.Ramp.Until.Sub(b.Ramp.Since) != 3*time.Second || b.Ramp.RPS <= 0 {
				t.Errorf("node %s shows ramp %+v", b.Node, *b.Ramp)
			}
		}
	}
	if shown == 0 {
		t.Errorf("GET /v1/breakers?scope=cluster shows no ramp: %+v", list.Breakers)
	}
	testwait.For(t, 60*time.Second, "every task delivered", func() bool {
		for _, id := range ids {
			if tk, ok := c.nodes[0].store.Reader().Task(id); !ok || tk.Status != state.TaskSucceeded {
				return false
			}
		}
		return true
	})

	var closed time.Time
	for _, call := range dest.Calls() {
		if call.Status >= 200 && call.Status < 300 && !call.At.Before(recovered) && (closed.IsZero() || call.At.Before(closed)) {
			closed = call.At
		}
	}
	first := 0
	for _, call := range dest.Calls() {
		if !call.At.Before(closed) && call.At.Sub(closed) < time.Second {
			first++
		}
	}
	t.Logf("%d calls in the first second after the close (start rate %d)", first, start)
	if limit := start + 2*len(c.nodes); first > limit {
		t.Fatalf("%d calls in the first second after the close; the ramp allows %d (start %d + a probe and a token per node)", first, limit, start)
	}
	testwait.For(t, 10*time.Second, "every ramp over", func() bool {
		for _, n := range c.nodes {
			if _, ok := n.deliver.queue.Ramp(key); ok {
				return false
			}
		}
		return true
	})
}
