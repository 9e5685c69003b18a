package node

import (
	"errors"

	"fusebox/queue"
	"fusebox/transport/outbound"
)

// deliveries is the outbound side of a node: the executor that calls
// destinations and the queue that feeds it from the shards this node owns.
type deliveries struct {
	exec  *outbound.Executor
	queue *queue.Queue
}

// startDeliveries builds the executor and the queue over the replicated task
// table and starts reading the shards in owned.
func (n *Node) startDeliveries(owned queue.Ownership, policy *outbound.Policy) (*deliveries, error) {
	exec, err := outbound.New(outbound.Options{Logger: n.log.With("component", "outbound"), Registerer: n.reg, Policy: policy, Series: n.pool})
	if err != nil {
		return nil, err
	}
	q, err := queue.New(queue.Config{NodeID: n.cfg.NodeID}, queue.Deps{
		Store:      NewTaskStore(n.store, n.cfg.NodeID),
		Ownership:  owned,
		Limits:     queue.DynamicLimits(n.config),
		Breakers:   queue.PoolBreakers(n.pool),
		Executor:   exec,
		Resolver:   endpointResolver{n.store},
		Policy:     policy,
		Registerer: n.reg,
		Logger:     n.log.With("component", "queue"),
	})
	if err != nil {
		_ = exec.Close()
		return nil, err
	}
	q.Start()
	return &deliveries{exec: exec, queue: q}, nil
}

// close lets in-flight calls finish (bounded by the queue's drain timeout),
// writes their results, then closes the executor's connections.
func (d *deliveries) close() error {
	if d == nil {
		return nil
	}
	return errors.Join(d.queue.Close(), d.exec.Close())
}
