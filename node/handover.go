package node

import (
	"context"
	"fmt"
	"time"

	"fusebox/api"
	"fusebox/ownership"
	"fusebox/queue"
)

// handOverShards is ownership.Config.HandOver: the leader asks a shard's
// live owner to hand shards over before moving them (queue/handover.go).
// Itself it asks directly; a peer through its API (node role), so a peer
// of an older build, which has no such route, answers 404 and its shards
// move as before.
func (n *Node) handOverShards(ctx context.Context, node, httpAddr string, shards map[int]uint64, wait, hold time.Duration) error {
	var unfinished int
	if node == n.cfg.NodeID {
		q := n.queueFwd.q.Load()
		if q == nil {
			return nil // no queue yet: nothing under way
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		for _, h := range q.HandOver(wctx, shards, hold) {
			unfinished += h.Unfinished
		}
	} else {
		req := api.HandOverRequest{WaitMS: wait.Milliseconds(), HoldMS: hold.Milliseconds()}
		for id, e := range shards {
			req.Shards = append(req.Shards, api.ShardEpoch{Shard: id, Epoch: e})
		}
		ans, err := n.peerClient(httpAddr).HandOver(ctx, req)
		if err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		for _, h := range ans.Shards {
			unfinished += h.Unfinished
		}
	}
	if unfinished > 0 {
		return fmt.Errorf("%w: %s had %d calls under way or results unwritten after %v", ownership.ErrUnfinished, node, unfinished, wait)
	}
	return nil
}

// apiHandover adapts the queue to api.ShardHandover.
type apiHandover struct{ q *queue.Queue }

func (a apiHandover) HandOver(ctx context.Context, shards map[int]uint64, hold time.Duration) []api.HandedOverShard {
	hs := a.q.HandOver(ctx, shards, hold)
	out := make([]api.HandedOverShard, len(hs))
	for i, h := range hs {
		out[i] = api.HandedOverShard{Shard: h.Shard, Epoch: h.Epoch, WaitedMS: h.Waited.Milliseconds(), Unfinished: h.Unfinished}
	}
	return out
}
