package node

import (
	"context"
	"time"

	"fusebox/ownership"
)

// Shard ownership wiring. The functions take the manager explicitly so this
// file builds on its own; node.go keeps it in Node.shards.

// startShards builds and starts the node's shard ownership. Call it after
// raftstore.New and cluster.New and before n.store.Start: the manager
// registers its leader placement loop with the store.
func (n *Node) startShards() (*ownership.Manager, error) {
	cfg := ownership.Config{NodeID: n.cfg.NodeID, Shards: n.cfg.Shards, Logger: n.log, Registerer: n.reg, Stats: n.shardStats,
		CaughtUp: n.syncDerived, HandOver: n.handOverShards}
	if n.pg != nil {
		cfg.Unfit = n.unfitOwners // pghealth.go
		cfg.StoreFences = n.pgFences
	}
	if n.cfg.Timing == "fast" {
		cfg.Backstop = time.Second
		cfg.DrainTimeout = 5 * time.Second
		cfg.HandOverWait = time.Second
	}
	m, err := ownership.New(cfg, n.store, n.store.Reader(), raftMembers{n.members})
	if err != nil {
		return nil, err
	}
	if err := m.Start(); err != nil {
		return nil, err
	}
	return m, nil
}

// shardStats reports a shard's backlog (pending tasks) and ack level: the
// creation time, in Unix milliseconds, of its oldest pending task — every
// task of the shard created before it is done (0: nothing pending).
func (n *Node) shardStats(shard int) (backlog int, ackLevel uint64, ok bool) {
	if n.pg != nil {
		return n.pg.shardStats(shard)
	}
	backlog = n.state.TaskBacklog(shard)
	if backlog > 0 {
		if oldest, ok := n.state.OldestPendingTask(shard); ok {
			ackLevel = uint64(oldest.CreatedAt.UnixMilli())
		}
	}
	return backlog, ackLevel, true
}

// shardsReady adds shard ownership to the readiness detail and reports
// whether it is ready: the cluster's shard count matches --shards and a
// shard map is known.
func shardsReady(m *ownership.Manager, detail map[string]any) bool {
	if m == nil {
		return true
	}
	ok, why := m.Ready()
	detail["shards_ready"] = ok
	if why != "" {
		detail["shards"] = why
	}
	return ok
}

// handOver is a graceful stop's hand-over of the shards: first the queue
// stops (no call starts; the calls under way finish, up to the queue's
// DrainTimeout, and their results are written at the epochs this node
// still holds), then the shards are drained to the other nodes, whose
// owners so find those tasks done. Drained first, a shard moved while its
// calls were under way: they were cancelled, their answers dropped
// unwritten, and the next owner called every one of them again (with the
// leader's hand-over when the node returns, ownership/DESIGN.md: 26
// duplicate deliveries in TestTasksRollingRestart before, none after).
// The tasks of this node's shards wait meanwhile: for the longest call
// under way, then the move.
func (n *Node) handOver(ctx context.Context) error {
	err := n.deliver.stopQueue()
	if ferr := n.failErr(); ferr != nil {
		// A failed store applies nothing: the drain's new map would never
		// reach this node, and it would wait out the drain timeout. Its
		// leave moves the shards at once.
		n.log.Info("not draining shards: this node's state cannot follow the cluster; they move when it leaves", "err", ferr)
		return err
	}
	n.drainShards(ctx, n.shards)
	return err
}

// failErr is the store's FailErr (nil without a store).
func (n *Node) failErr() error {
	if n.store == nil {
		return nil
	}
	return n.store.FailErr()
}

// drainShards hands this node's shards to the other members before a
// graceful shutdown, bounded by ctx and the manager's drain timeout. A
// failed drain is logged, not fatal: the node's departure re-places its
// shards anyway, only later.
func (n *Node) drainShards(ctx context.Context, m *ownership.Manager) {
	if m == nil {
		return
	}
	if err := m.Drain(ctx); err != nil {
		n.log.Warn("draining shards before shutdown failed; they move when the node leaves", "err", err)
	}
}

// closeShards stops shard ownership (no drain).
func closeShards(m *ownership.Manager) {
	if m != nil {
		_ = m.Close()
	}
}
