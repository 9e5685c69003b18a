package ownership

import (
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/raftstore"
)

// handOverLog records the leader's hand-over calls and, for each, whether
// the committed map (as the leader had applied it) still gave the asked
// node every shard it was asked for: the hand-over comes before the move.
type handOverLog struct {
	mu    sync.Mutex
	calls []handOverCall
	fail  error // returned by every call while set
}

type handOverCall struct {
	leader, node string
	shards       map[int]uint64
	stillOwned   bool
}

func (h *handOverLog) take() []handOverCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.calls
	h.calls = nil
	return out
}

// Planned moves away from a live owner are handed over first, exactly the
// shards (at their epochs) that then move; a failed owner's shards move
// with no hand-over; a hand-over that fails does not hold a move back.
func TestHandOverBeforePlannedMoves(t *testing.T) {
	c := newCluster(t)
	log := &handOverLog{}
	c.handOver = func(leader, node, _ string, shards map[int]uint64) error {
		m := c.nodes[leader].own.Holder().Load()
		owned := m != nil
		for id, e := range shards {
			if owned && (m.Shards[id].Owner != node || m.Shards[id].Epoch != e) {
				owned = false
			}
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		log.calls = append(log.calls, handOverCall{leader: leader, node: node, shards: maps.Clone(shards), stillOwned: owned})
		return log.fail
	}
	c.start("a", 2, 24)
	c.start("b", 2, 24)
	testwait.For(t, 20*time.Second, "converged on a, b", func() bool { return c.converged("a", "b") })
	before := c.nodes["a"].own.Holder().Load()
	log.take() // the first placement moved nothing away from a live owner

	c.start("c", 2, 24)
	testwait.For(t, 20*time.Second, "converged on a, b, c", func() bool {
		return c.converged("a", "b", "c") && len(c.nodes["c"].own.Owned()) > 0
	})
	after := c.nodes["a"].own.Holder().Load()
	moved := map[string]map[int]uint64{}
	for i, s := range after.Shards {
		if was := before.Shards[i]; was.Owner != s.Owner {
			if moved[was.Owner] == nil {
				moved[was.Owner] = map[int]uint64{}
			}
			moved[was.Owner][i] = was.Epoch
		}
	}
	asked := map[string]map[int]uint64{}
	for _, call := range log.take() {
		if !call.stillOwned {
			t.Errorf("%s was asked to hand over %v after the move was committed", call.node, call.shards)
		}
		if asked[call.node] == nil {
			asked[call.node] = map[int]uint64{}
		}
		maps.Copy(asked[call.node], call.shards)
	}
	if len(moved) == 0 || !maps.EqualFunc(moved, asked, maps.Equal) {
		t.Fatalf("shards moved to c from live owners %v, hand-overs asked %v", moved, asked)
	}

	// c fails: its shards move at once, nobody is asked.
	leader := ""
	for id, n := range c.nodes {
		if n.store.State().String() == "Leader" {
			leader = id
		}
	}
	if leader == "c" {
		t.Skip("c leads: stopping it would test an election, not a failed owner")
	}
	c.stop("c", raftstore.MemberFailed)
	testwait.For(t, 20*time.Second, "c's shards re-owned", func() bool { return c.converged("a", "b") })
	for _, call := range log.take() {
		if call.node == "c" {
			t.Fatalf("failed member c was asked to hand over %v", call.shards)
		}
	}

	// A failing hand-over is counted and the move still happens.
	log.mu.Lock()
	log.fail = errors.New("connection refused")
	log.mu.Unlock()
	c.start("c", 2, 24)
	testwait.For(t, 20*time.Second, "c owns shards again despite failing hand-overs", func() bool {
		return c.converged("a", "b", "c") && len(c.nodes["c"].own.Owned()) > 0
	})
	if len(log.take()) == 0 {
		t.Fatal("no hand-over was asked when c returned")
	}
	failed := 0.0
	for _, n := range c.nodes {
		failed += testutil.ToFloat64(n.own.metrics.handovers.WithLabelValues("error"))
	}
	if failed == 0 {
		t.Fatal("no node counted fusebox_shard_handovers_total{result=error}")
	}
}
