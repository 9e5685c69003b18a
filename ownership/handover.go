package ownership

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"fusebox/raftstore"
	"fusebox/shardmap"
)

// ErrUnfinished is HandOver's answer when some calls were still under way,
// or results unwritten, when its wait ended: the next owner may make those
// calls again.
var ErrUnfinished = errors.New("hand-over unfinished")

// handOverPlan lists, per alive member, the shards (id → epoch in cur)
// that next moves away from it, with the member's HTTP address. Owners
// that are not alive members (failed, left, unknown, or suspect: maybe
// unreachable) are not in it: their shards move at once, as before.
func (m *Manager) handOverPlan(cur, next *shardmap.Map) map[string]handOverAsk {
	if m.cfg.HandOver == nil || cur == nil {
		return nil
	}
	addr := map[string]string{}
	for _, mb := range m.members.Members() {
		if mb.Status == raftstore.MemberAlive && mb.HTTPAddr != "" {
			addr[mb.ID] = mb.HTTPAddr
		}
	}
	plan := map[string]handOverAsk{}
	for i, s := range cur.Shards {
		if i >= len(next.Shards) || s.Owner == "" || next.Shards[i].Owner == s.Owner {
			continue
		}
		a, live := addr[s.Owner]
		if !live {
			continue
		}
		ask, ok := plan[s.Owner]
		if !ok {
			ask = handOverAsk{addr: a, shards: map[int]uint64{}}
			plan[s.Owner] = ask
		}
		ask.shards[i] = s.Epoch
	}
	return plan
}

// handOverAsk is one member's part of a hand-over.
type handOverAsk struct {
	addr   string
	shards map[int]uint64
}

// firstMoves is the part of the move from cur to next that needs no
// hand-over (a failed owner's shards, unowned ones), as a map of its own
// one version after cur; nil when there is none. The leader commits it
// before asking for the hand-overs, so a failed member's shards do not
// wait for a live one's calls.
func firstMoves(cur, next *shardmap.Map, plan map[string]handOverAsk) *shardmap.Map {
	var first *shardmap.Map
	for i, s := range cur.Shards {
		n := next.Shards[i]
		if n == s {
			continue
		}
		if ask, ok := plan[s.Owner]; ok {
			if _, asked := ask.shards[i]; asked {
				continue
			}
		}
		if first == nil {
			first = &shardmap.Map{Version: cur.Version + 1, NumShards: cur.NumShards, Shards: append([]shardmap.Assignment(nil), cur.Shards...)}
		}
		first.Shards[i] = n
	}
	return first
}

// handOver asks every member in plan to hand its shards over
// (Config.HandOver), all at once, and returns when every one has answered
// or HandOverWait has passed. Errors are counted and logged, and the move
// goes ahead regardless: a hand-over only spares duplicate calls.
//
// A member of cur failing meanwhile interrupts the wait (interrupted
// true): its shards must not wait for the others' calls. The caller then
// commits nothing and places again at once, the failure's moves first;
// the owners asked stay held, and are asked again.
func (m *Manager) handOver(ctx context.Context, cur *shardmap.Map, plan map[string]handOverAsk) (interrupted bool) {
	if len(plan) == 0 {
		return false
	}
	wait := m.cfg.HandOverWait
	hold := wait + holdMargin
	ctx, cancel := context.WithTimeout(ctx, wait+callMargin)
	defer cancel()
	var failed atomic.Bool
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		m.watchOwnersFail(ctx, cur, func() { failed.Store(true); cancel() })
	}()
	defer func() { cancel(); <-watchDone }()
	begin := time.Now()
	var wg sync.WaitGroup
	for node, ask := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.cfg.HandOver(ctx, node, ask.addr, ask.shards, wait, hold)
			switch {
			case failed.Load():
				m.metrics.handovers.WithLabelValues("interrupted").Inc()
				m.log.Info("hand-over interrupted: a member failed; placing again", "node", node, "shards", len(ask.shards))
			case err == nil:
				m.metrics.handovers.WithLabelValues("ok").Inc()
				m.log.Info("shards handed over before the move", "node", node, "shards", len(ask.shards), "took", time.Since(begin))
			case errors.Is(err, ErrUnfinished):
				m.metrics.handovers.WithLabelValues("unfinished").Inc()
				m.log.Warn("shards moved with calls still under way: the next owner may make them again", "node", node, "shards", len(ask.shards), "err", err)
			default:
				m.metrics.handovers.WithLabelValues("error").Inc()
				m.log.Warn("hand-over failed; moving the shards anyway", "node", node, "shards", len(ask.shards), "err", err)
			}
		}()
	}
	wg.Wait()
	return failed.Load()
}

// watchOwnersFail calls failed once a member owning shards in cur is
// failed, left or gone from the membership, or returns when ctx ends.
func (m *Manager) watchOwnersFail(ctx context.Context, cur *shardmap.Map, failed func()) {
	wake, unsub := m.members.Subscribe()
	defer unsub()
	owners := map[string]bool{}
	for _, s := range cur.Shards {
		if s.Owner != "" {
			owners[s.Owner] = true
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-wake:
			if !ok {
				return
			}
		}
		live := map[string]bool{}
		for _, mb := range m.members.Members() {
			if mb.Status == raftstore.MemberAlive || mb.Status == raftstore.MemberSuspect {
				live[mb.ID] = true
			}
		}
		for o := range owners {
			if !live[o] {
				failed()
				return
			}
		}
	}
}

const (
	// callMargin is the leader's allowance beyond HandOverWait for the
	// call itself (the round trip, the last result write's answer).
	callMargin = time.Second
	// holdMargin is how much longer than the wait the owner keeps the
	// shards held: the move normally lands within a Raft commit of the
	// answer; if it never comes (this leader failed in between), the
	// owner works on them again after the hold.
	holdMargin = 3 * time.Second
)
