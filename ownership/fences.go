package ownership

import (
	"context"
	"fmt"
	"time"

	"fusebox/shardmap"
)

// Fences of the task store. With the PostgreSQL store a node works on a
// shard only once it has raised the shard's epoch in the database to the
// committed map's (pgstore.FencedOwnership): the database keeps each
// shard's fence, the owner and epoch of its last acquire. Within one
// cluster's history no fence is ahead of the committed map, since nodes
// acquire only epochs of committed maps. A fence that is ahead comes from
// another history: a cluster rebuilt on the database of an older one (its
// Raft state lost, or new data dirs), or a map restored from a snapshot
// older than the database. Its acquires would all be refused, and the
// shard's tasks would wait for ever, so the leader raises the shard's epoch
// in the map past the fence (keeping its owner) and the owner acquires it.

// fenceReadTimeout bounds the leader's read of the fences: a placement
// never waits longer on the database.
const fenceReadTimeout = time.Second

// storeFences reads the task store's fences (Config.StoreFences), or nil
// when there is none to read or it cannot be read now: placement goes on
// without them and the next one reads again.
func (m *Manager) storeFences(ctx context.Context) map[int]shardmap.Assignment {
	if m.cfg.StoreFences == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, fenceReadTimeout)
	defer cancel()
	f, err := m.cfg.StoreFences(ctx)
	if err != nil {
		m.log.Debug("task store fences not read; placing without them", "err", err)
		return nil
	}
	return f
}

// fenceAhead: the fence f of a shard is ahead of its assignment a — a
// higher epoch, or the same epoch taken by another owner.
func fenceAhead(a, f shardmap.Assignment) bool {
	return f.Epoch > a.Epoch || (f.Epoch == a.Epoch && f.Owner != "" && f.Owner != a.Owner)
}

// anyFenceAhead reports whether a fence of one of the cluster's count
// shards is ahead of sm (nil: no map yet, every epoch 0). Fences of shards
// the cluster does not have (a database left by a cluster with more) are
// not: nothing could raise them.
func anyFenceAhead(sm *shardmap.Map, count int, fences map[int]shardmap.Assignment) bool {
	for shard, f := range fences {
		if shard < 0 || shard >= count {
			continue
		}
		a := shardmap.Assignment{Shard: shard}
		if sm != nil && shard < len(sm.Shards) {
			a = sm.Shards[shard]
		}
		if fenceAhead(a, f) {
			return true
		}
	}
	return false
}

// raiseToFences returns a copy of next, at version, in which every shard
// whose fence is ahead of its assignment has the fence's epoch plus one,
// and a line per raised shard for the log; nil when no fence is ahead.
func raiseToFences(next *shardmap.Map, version uint64, fences map[int]shardmap.Assignment) (*shardmap.Map, []string) {
	var out *shardmap.Map
	var why []string
	for shard, f := range fences {
		if shard < 0 || shard >= len(next.Shards) || !fenceAhead(next.Shards[shard], f) {
			continue
		}
		if out == nil {
			out = &shardmap.Map{Version: version, NumShards: next.NumShards, Shards: append([]shardmap.Assignment(nil), next.Shards...)}
		}
		a := &out.Shards[shard]
		why = append(why, fmt.Sprintf("shard %d: map %s@%d, task store %s@%d → epoch %d", shard, a.Owner, a.Epoch, f.Owner, f.Epoch, f.Epoch+1))
		a.Epoch = f.Epoch + 1
	}
	return out, why
}
