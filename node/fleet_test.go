package node

import (
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Issue 19 §3 across a real 3-node cluster (real Raft, real memberlist, a
// real destination): with fusebox.destination.fleetRPS set, the nodes
// holding a skewed backlog (80/10/10) share the budget by backlog, the
// breaker list shows each node's share, and the destination never sees
// much more than the budget in any second (the per-host rate alone would
// allow three times it).
func TestFleetBudgetAcrossNodes(t *testing.T) {
	const budget, total = 60, 240
	dest := transporttest.NewDestination(t)
	c := newTestCluster(t, 3, nil)
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	setConfig(t, c.nodes, dynconfig.KeyHostSchedulerMaxTaskRPS, host, fmt.Sprint(budget))
	setConfig(t, c.nodes, dynconfig.KeyGroupLimiterBufferSize, host, "1000")
	setConfig(t, c.nodes, dynconfig.KeyFleetRPS, host, fmt.Sprint(budget))

	tasks := skewedTasks(t, nodesOf(c.nodes), dest.CallbackURL(), "fleet", total, skew(3))
	clients := make([]*api.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = n.client()
	}
	ids := deliverybench.SubmitAll(t, clients, tasks)
	submitted := time.Now()

	// The busy node's share, as the API shows it: about 0.8, and every
	// node's share listed.
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns-bench", Destination: host}
	busy := c.nodes[0]
	testwait.For(t, 10*time.Second, "the busy node's share above one half in GET /v1/breakers", func() bool {
		list, err := busy.client().Breakers(ctxT(t), false)
		if err != nil {
			return false
		}
		for _, b := range list.Breakers {
			if b.Destination == host && b.Fleet != nil && b.Fleet.BudgetRPS == budget && b.Fleet.Share > 0.5 && len(b.Fleet.Nodes) == 3 {
				return true
			}
		}
		return false
	})
	if st, ok := busy.deliver.queue.Fleet(key); !ok || st.RPS > budget {
		t.Fatalf("busy node's fleet status %+v, %v", st, ok)
	}
	testwait.For(t, 60*time.Second, "every task delivered", func() bool {
		for _, id := range ids {
			if tk, ok := busy.store.Reader().Task(id); !ok || tk.Status != state.TaskSucceeded {
				return false
			}
		}
		return true
	})
	r := measureFleet(dest.Calls(), submitted, budget)
	t.Logf("peak %.0f calls/s (budget %d), utilisation %.2f, drain %v", r.peak, budget, r.utilisation, r.drain)
	// Loose on purpose: the destination stamps calls when it serves them,
	// and a loaded test machine can bunch them up.
	if r.peak > 1.5*budget {
		t.Fatalf("peak %.0f calls in one second, budget %d (without it: up to %d)", r.peak, budget, 3*budget)
	}
}
