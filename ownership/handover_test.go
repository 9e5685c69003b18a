package ownership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/raftstore"
	"fusebox/shardmap"
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
	c.handOver = func(_ context.Context, leader, node, _ string, shards map[int]uint64) error {
		m := c.nodes[leader].own.state.ShardMap()
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

// firstMoves keeps what needs no hand-over (a failed owner's shard, an
// unowned one) and leaves the live owners' moves for after theirs.
func TestFirstMovesLeaveLiveOwnersShards(t *testing.T) {
	cur := &shardmap.Map{Version: 7, NumShards: 4, Shards: []shardmap.Assignment{
		{Shard: 0, Owner: "a", Epoch: 3}, // a is alive: handed over
		{Shard: 1, Owner: "dead", Epoch: 5},
		{Shard: 2, Owner: "", Epoch: 2},
		{Shard: 3, Owner: "b", Epoch: 1}, // stays
	}}
	next := &shardmap.Map{Version: 8, NumShards: 4, Shards: []shardmap.Assignment{
		{Shard: 0, Owner: "c", Epoch: 4},
		{Shard: 1, Owner: "c", Epoch: 6},
		{Shard: 2, Owner: "b", Epoch: 3},
		{Shard: 3, Owner: "b", Epoch: 1},
	}}
	plan := map[string]handOverAsk{"a": {addr: "http-a", shards: map[int]uint64{0: 3}}}
	first := firstMoves(cur, next, plan)
	if first == nil || first.Version != 8 {
		t.Fatalf("first = %+v, want a map at version 8", first)
	}
	want := []shardmap.Assignment{cur.Shards[0], next.Shards[1], next.Shards[2], cur.Shards[3]}
	if !slices.Equal(first.Shards, want) {
		t.Fatalf("first moves %+v, want %+v", first.Shards, want)
	}
	if cur.Shards[1].Owner != "dead" {
		t.Fatal("firstMoves changed cur")
	}
	// Only live owners' moves: nothing to commit first.
	next.Shards[1], next.Shards[2] = cur.Shards[1], cur.Shards[2]
	if f := firstMoves(cur, next, plan); f != nil {
		t.Fatalf("first = %+v with only a hand-over's move, want nil", f)
	}
}

// A member fails while two join, in one membership change: the failed
// member's shards are committed to their new owners before the leader
// waits for any hand-over, not after.
func TestFailedOwnersShardsDoNotWaitForHandOvers(t *testing.T) {
	c := newCluster(t)
	c.quiet = map[string]bool{"d": true, "e": true}
	var mu sync.Mutex
	var calls int
	var victim string
	var deadStillOwned []int
	c.handOver = func(_ context.Context, leader, node, _ string, shards map[int]uint64) error {
		m := c.nodes[leader].own.state.ShardMap() // what the leader has applied (its holder follows a little later)
		mu.Lock()
		defer mu.Unlock()
		calls++
		for id, s := range m.Shards {
			if s.Owner == victim {
				deadStillOwned = append(deadStillOwned, id)
			}
		}
		return nil
	}
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 24)
	}
	testwait.For(t, 20*time.Second, "converged on a, b, c", func() bool { return c.converged("a", "b", "c") })
	var live []string
	for _, id := range []string{"c", "b", "a"} { // the victim: a follower (a leader's failure is an election)
		if victim == "" && c.nodes[id].store.State().String() != "Leader" {
			mu.Lock()
			victim = id
			mu.Unlock()
		} else {
			live = append(live, id)
		}
	}
	c.start("d", 0, 24)
	c.start("e", 0, 24)
	c.crash(victim)
	c.announce(map[string]raftstore.MemberStatus{victim: raftstore.MemberFailed})
	live = append(live, "d", "e")
	testwait.For(t, 30*time.Second, fmt.Sprintf("converged on %v", live), func() bool {
		return c.converged(live...) && len(c.nodes["d"].own.Owned()) > 0 && len(c.nodes["e"].own.Owned()) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if calls == 0 {
		t.Fatal("no hand-over was asked: the live members gave no shard to d and e (the test needs them to)")
	}
	if len(deadStillOwned) > 0 {
		t.Fatalf("hand-overs were asked while failed %s still owned shards %v", victim, deadStillOwned)
	}
}

// A member fails while the leader waits for a hand-over: the wait ends at
// once and the failed member's shards move, not HandOverWait (a minute
// here) later; the hand-over is asked again after.
func TestMemberFailingDuringHandOverDoesNotWait(t *testing.T) {
	c := newCluster(t)
	c.handOverWait = time.Minute
	var mu sync.Mutex
	blocked := make(chan struct{})
	var first sync.Once
	calls := 0
	c.handOver = func(ctx context.Context, _, _, _ string, _ map[int]uint64) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			first.Do(func() { close(blocked) })
			<-ctx.Done() // an owner whose calls do not end
			return ctx.Err()
		}
		return nil
	}
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, 3, 24)
	}
	testwait.For(t, 20*time.Second, "converged on a, b, c", func() bool { return c.converged("a", "b", "c") })
	var victim string
	var live []string
	for _, id := range []string{"c", "b", "a"} { // a follower (a leader's failure is an election)
		if victim == "" && c.nodes[id].store.State().String() != "Leader" {
			victim = id
		} else {
			live = append(live, id)
		}
	}
	c.start("d", 0, 24) // the leader moves shards to d and waits for their owners
	select {
	case <-blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("no hand-over was asked when d joined")
	}
	c.stop(victim, raftstore.MemberFailed)
	live = append(live, "d")
	// Well under the minute the hand-over would have waited.
	testwait.For(t, 15*time.Second, fmt.Sprintf("%s's shards moved and converged on %v", victim, live), func() bool {
		return c.converged(live...) && len(c.nodes["d"].own.Owned()) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if calls < 2 {
		t.Fatalf("%d hand-over calls: the planned moves were not asked again after the failure", calls)
	}
	var interrupted float64
	for _, id := range live {
		interrupted += testutil.ToFloat64(c.nodes[id].own.metrics.handovers.WithLabelValues("interrupted"))
	}
	if interrupted < 1 {
		t.Fatal("no node counted fusebox_shard_handovers_total{result=interrupted}")
	}
}
