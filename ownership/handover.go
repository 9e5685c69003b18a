package ownership

import (
	"context"
	"errors"
	"sync"
	"time"

	"fusebox/raftstore"
	"fusebox/shardmap"
)

// ErrUnfinished is HandOver's answer when some calls were still under way,
// or results unwritten, when its wait ended: the next owner may make those
// calls again.
var ErrUnfinished = errors.New("hand-over unfinished")

// handOver asks each live owner that next takes shards from to hand them
// over first (Config.HandOver), all at once, and returns when every one has
// answered or HandOverWait has passed. Owners that are not alive members
// (failed, left, unknown, or suspect: maybe unreachable) are not asked:
// their shards move at once, as before. Errors are counted and logged, and
// the move goes ahead regardless: a hand-over only spares duplicate calls.
func (m *Manager) handOver(ctx context.Context, cur, next *shardmap.Map) {
	if m.cfg.HandOver == nil || cur == nil {
		return
	}
	addr := map[string]string{}
	for _, mb := range m.members.Members() {
		if mb.Status == raftstore.MemberAlive && mb.HTTPAddr != "" {
			addr[mb.ID] = mb.HTTPAddr
		}
	}
	from := map[string]map[int]uint64{}
	for i, s := range cur.Shards {
		if i >= len(next.Shards) || s.Owner == "" || next.Shards[i].Owner == s.Owner {
			continue
		}
		if _, live := addr[s.Owner]; !live {
			continue
		}
		if from[s.Owner] == nil {
			from[s.Owner] = map[int]uint64{}
		}
		from[s.Owner][i] = s.Epoch
	}
	if len(from) == 0 {
		return
	}
	wait := m.cfg.HandOverWait
	hold := wait + holdMargin
	ctx, cancel := context.WithTimeout(ctx, wait+callMargin)
	defer cancel()
	begin := time.Now()
	var wg sync.WaitGroup
	for node, shards := range from {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.cfg.HandOver(ctx, node, addr[node], shards, wait, hold)
			switch {
			case err == nil:
				m.metrics.handovers.WithLabelValues("ok").Inc()
				m.log.Info("shards handed over before the move", "node", node, "shards", len(shards), "took", time.Since(begin))
			case errors.Is(err, ErrUnfinished):
				m.metrics.handovers.WithLabelValues("unfinished").Inc()
				m.log.Warn("shards moved with calls still under way: the next owner may make them again", "node", node, "shards", len(shards), "err", err)
			default:
				m.metrics.handovers.WithLabelValues("error").Inc()
				m.log.Warn("hand-over failed; moving the shards anyway", "node", node, "shards", len(shards), "err", err)
			}
		}()
	}
	wg.Wait()
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
