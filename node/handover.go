package node

import (
	"context"
	"fmt"
	"time"

	"fusebox/api"
	"fusebox/ownership"
	"fusebox/queue"
	"fusebox/raftstore/state"
)

// handOverShards is ownership.Config.HandOver: the leader asks a shard's
// live owner to hand shards over before moving them (queue/handover.go).
// Itself it asks directly; a peer through its API (node role), so a peer
// of an older build, which has no such route, answers 404 and its shards
// move as before.
//
// A peer that cannot reach the PostgreSQL task store (pghealth.go: the
// leader moves its shards away) answers with the results it could not
// write; the leader writes them at the epoch the peer still holds, before
// the move is committed (relayResults). Without that, the next owner made
// every call the peer had answered since the cut again.
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
			if len(h.Results) > 0 && n.relayResults(ctx, node, shards, h) {
				unfinished += h.UnderWay // the results are written
				continue
			}
			unfinished += h.Unfinished
		}
	}
	if unfinished > 0 {
		return fmt.Errorf("%w: %s had %d calls under way or results unwritten after %v", ownership.ErrUnfinished, node, unfinished, wait)
	}
	return nil
}

// relayTimeout bounds the leader's write of a peer's results (within the
// hand-over's own deadline: its wait plus a second for the call).
const relayTimeout = 5 * time.Second

// relayResults writes, with the PostgreSQL task store, the results a peer
// handed over with a shard at the epoch the peer holds it (still current:
// the move is not committed yet, and the store's fence refuses the write
// otherwise). It reports whether every one was written. Only a shard the
// leader asked for, at the epoch it asked, is written; a result that does
// not validate fails the relay (the peer's own copies stay).
func (n *Node) relayResults(ctx context.Context, node string, asked map[int]uint64, h api.HandedOverShard) bool {
	if n.pg == nil {
		return false // the raft store: the owner writes its own results
	}
	if e, ok := asked[h.Shard]; !ok || e != h.Epoch {
		n.log.Warn("hand-over answer names a shard not asked for; its results are not written", "node", node, "shard", h.Shard, "epoch", h.Epoch)
		return false
	}
	for i := range h.Results {
		if err := h.Results[i].Validate(); err != nil {
			n.log.Warn("hand-over result invalid; the shard's results are not written", "node", node, "shard", h.Shard, "result", i, "error", err)
			return false
		}
	}
	wctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	for rs := h.Results; len(rs) > 0; {
		k := min(len(rs), state.MaxTaskBatch)
		if err := n.pg.store.Complete(wctx, h.Shard, h.Epoch, rs[:k]); err != nil {
			n.log.Warn("results handed over not written; the next owner may make those calls again", "node", node, "shard", h.Shard, "epoch", h.Epoch, "error", err)
			return false
		}
		rs = rs[k:]
	}
	n.log.Info("results handed over written for an owner that cannot reach the task store", "node", node, "shard", h.Shard, "epoch", h.Epoch, "results", len(h.Results))
	return true
}

// maxRelayBytes bounds the results one hand-over answer carries (about
// their encoded size): the rest stay with the shard, whose next owner may
// make those calls again. The API client reads at most 32 MiB.
const maxRelayBytes = 8 << 20

// apiHandover adapts the queue to api.ShardHandover. With relay (the
// PostgreSQL task store, whose leader writes them: relayResults) the answer
// carries the results not yet written; the raft store's leader would only
// drop them. While unwritable says this node cannot reach its task store
// (pghealth.go), the answer comes as soon as the calls have ended rather
// than at the leader's wait: no write would land before it.
type apiHandover struct {
	q          *queue.Queue
	relay      bool
	unwritable func() bool
}

func (a apiHandover) HandOver(ctx context.Context, shards map[int]uint64, hold time.Duration) []api.HandedOverShard {
	var hs []queue.HandedOver
	if a.unwritable != nil && a.unwritable() {
		hs = a.q.HandOverUnwritable(ctx, shards, hold)
	} else {
		hs = a.q.HandOver(ctx, shards, hold)
	}
	out := make([]api.HandedOverShard, len(hs))
	budget := maxRelayBytes
	for i, h := range hs {
		out[i] = api.HandedOverShard{Shard: h.Shard, Epoch: h.Epoch, WaitedMS: h.Waited.Milliseconds(), Unfinished: h.Unfinished, UnderWay: h.UnderWay}
		if !a.relay || len(h.Results) == 0 {
			continue
		}
		size := 0
		for _, r := range h.Results {
			size += 256 + len(r.TaskID) + len(r.Message) + len(r.OperationID) + 2*len(r.Output)
		}
		if size <= budget { // a shard's results go whole, or not at all
			out[i].Results = h.Results
			budget -= size
		}
	}
	return out
}
