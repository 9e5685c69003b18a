package node

import (
	"errors"
	"sync/atomic"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/queue"
	"fusebox/taskstore/pgstore"
	"fusebox/transport"
)

// queueForwarder tells the queue when a breaker closes, from any source
// (its own probe, a peer's hint, an operator's force), so the tasks that
// breaker had refused are due at once (queue/DESIGN.md, "Release on
// close"). The pool is built before the queue: transitions before the queue
// exists are dropped (nothing is blocked yet).
type queueForwarder struct {
	q    atomic.Pointer[queue.Queue]
	pool atomic.Pointer[breakerpool.Pool]
}

// observe is part of the pool's Observer; it must not block.
func (f *queueForwarder) observe(t breakerpool.Transition) {
	q := f.q.Load()
	if q == nil || t.Kind != breakerpool.KindStateChange {
		return
	}
	if t.To != gobreaker.StateClosed {
		q.KeyOpened(t.Key) // arms the recovery ramp (queue/ramp.go)
	}
	switch {
	case t.To == gobreaker.StateClosed:
		q.KeyClosed(t.Key)
	case t.To == gobreaker.StateHalfOpen && t.Source != breakerpool.SourceLocal:
		// A warm start (peer's recovery hint, operator's auto): nothing may
		// be due for a while, so hand the breaker its probe now. A local
		// half-open follows the open period, when the tasks it refused
		// come due anyway.
		q.KeyProbing(t.Key, f.probes(t.Key))
	}
}

// probes is the key's MaxRequests: how many probes its half-open admits.
func (f *queueForwarder) probes(k breakerpool.Key) int {
	if p := f.pool.Load(); p != nil {
		if b, ok := p.Lookup(k); ok {
			return int(max(b.Settings().MaxRequests, 1))
		}
	}
	return 1
}

// deliveries is the outbound side of a node: the executor that calls
// destinations and the queue that feeds it from the shards this node owns.
type deliveries struct {
	exec  *transport.Executor
	queue *queue.Queue
}

// startDeliveries builds the executor and the queue over the replicated task
// table and starts reading the shards in owned.
func (n *Node) startDeliveries(owned queue.Ownership, policy *transport.Policy) (*deliveries, error) {
	exec, err := transport.New(transport.Options{Logger: n.log.With("component", "outbound"), Registerer: n.reg, Policy: policy, Series: n.pool})
	if err != nil {
		return nil, err
	}
	var store queue.Store = NewTaskStore(n.store, n.cfg.NodeID)
	if n.pg != nil {
		// Every owner write is fenced in the database: a shard is read
		// only once its epoch is acquired there (pgstore/DESIGN.md).
		store = n.pg.store.ForQueue() // its depth gauge's count reused 1 s
		owned = pgstore.NewFencedOwnership(owned, n.pg.store, n.cfg.NodeID, n.log.With("component", "pgstore"))
	}
	q, err := queue.New(queue.Config{NodeID: n.cfg.NodeID}, queue.Deps{
		Store:      store,
		Ownership:  owned,
		Limits:     queue.DynamicLimits(n.config),
		Breakers:   queue.PoolBreakers(n.pool),
		Executor:   exec,
		Resolver:   endpointResolver{endpoints: n.state, sync: n.store.Sync},
		Policy:     policy,
		Fleet:      fleetShare{n.members},
		Registerer: n.reg,
		Logger:     n.log.With("component", "queue"),
	})
	if err != nil {
		_ = exec.Close()
		return nil, err
	}
	q.Start()
	n.members.SetBacklogSource(queueBacklogs{q}) // the fleet budget's gossip (node/fleet.go)
	n.queueFwd.pool.Store(n.pool)
	n.queueFwd.q.Store(q)
	return &deliveries{exec: exec, queue: q}, nil
}

// stopQueue stops the queue: no call starts, the calls under way finish
// (bounded by the queue's drain timeout) and their results are written.
// Node.Close calls it before handing the shards over (handOver).
func (d *deliveries) stopQueue() error {
	if d == nil {
		return nil
	}
	return d.queue.Close()
}

// close stops the queue (if stopQueue has not) and closes the executor's
// connections.
func (d *deliveries) close() error {
	if d == nil {
		return nil
	}
	return errors.Join(d.queue.Close(), d.exec.Close())
}
