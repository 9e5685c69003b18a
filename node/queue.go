package node

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/hintpolicy"
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
	// hints, when set, is the hint policy's forwarder: its confirmation
	// rounds tell a close that ends a check of a healthy destination
	// (episodes, below).
	hints *hintForwarder

	mu       sync.Mutex
	episodes map[breakerpool.Key]openEpisode
	pruneAt  int // prune episodes when there are this many (noteOpen)
}

// minEpisodePrune is the fewest open episodes noteOpen prunes at: a key
// whose breaker left the pool while open (evicted) never closes, so its
// episode would be kept for ever.
const minEpisodePrune = 1 << 14

// openEpisode is what this node saw of a breaker between its leaving closed
// and closing again.
type openEpisode struct {
	since time.Time // the first transition out of closed
	// failed: the breaker opened on this node's own failures (source
	// local) or on a Retry-After; either way the destination asked for a
	// careful return.
	failed bool
}

// observe is part of the pool's Observer; it must not block.
func (f *queueForwarder) observe(t breakerpool.Transition) {
	q := f.q.Load()
	if q == nil || t.Kind != breakerpool.KindStateChange {
		return
	}
	if t.To != gobreaker.StateClosed {
		f.noteOpen(t)
		if !f.delegating(t.Key) { // its calls pass through a peer: no outage to ramp out of (delegate.go)
			q.KeyOpened(t.Key) // arms the recovery ramp (queue/ramp.go)
		}
	}
	switch {
	case t.To == gobreaker.StateClosed:
		if f.refutedEpisode(t.Key) {
			q.KeyClosedWithoutRamp(t.Key)
		} else {
			q.KeyClosed(t.Key)
		}
	case t.To == gobreaker.StateHalfOpen && t.Source != breakerpool.SourceLocal:
		// A warm start (peer's recovery hint, operator's auto): nothing may
		// be due for a while, so hand the breaker its probe now. A local
		// half-open follows the open period, when the tasks it refused
		// come due anyway.
		q.KeyProbing(t.Key, f.probes(t.Key))
	}
}

// delegated is the hint policy's OnDelegate: k's refused calls now go
// through a peer, so its blocked tasks need not wait for the probe.
func (f *queueForwarder) delegated(k breakerpool.Key) {
	if q := f.q.Load(); q != nil {
		q.KeyDelegated(k)
	}
}

// delegating reports whether k's refused calls go through a peer.
func (f *queueForwarder) delegating(k breakerpool.Key) bool {
	if f.hints == nil {
		return false
	}
	p := f.hints.p.Load()
	return p != nil && p.Delegating(k)
}

// noteOpen records a transition out of closed (or between open and
// half-open) in k's episode.
func (f *queueForwarder) noteOpen(t breakerpool.Transition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.episodes == nil {
		f.episodes = map[breakerpool.Key]openEpisode{}
	}
	e, ok := f.episodes[t.Key]
	if !ok {
		e.since = t.At
		if len(f.episodes) >= max(f.pruneAt, minEpisodePrune) {
			f.pruneLocked()
		}
	}
	if (t.To == gobreaker.StateOpen && t.Source == breakerpool.SourceLocal) || !t.RetryUntil.IsZero() {
		e.failed = true
	}
	f.episodes[t.Key] = e
}

// pruneLocked forgets the episodes whose breaker is closed or gone from the
// pool, and sets the next prune at twice what is left.
func (f *queueForwarder) pruneLocked() {
	if p := f.pool.Load(); p != nil {
		for k := range f.episodes {
			if b, ok := p.Lookup(k); !ok || b.State() == gobreaker.StateClosed {
				delete(f.episodes, k)
			}
		}
	}
	f.pruneAt = 2 * len(f.episodes)
}

// refutedEpisode ends k's episode at its close and reports whether it was
// only a confirmation round's check of a destination nobody found failing:
// the breaker never opened on this node's own failures or a Retry-After,
// and k's latest round, refuted, ended during the episode. Under confirm
// a peer's first failure makes every other node pause (open without a
// call) and one of them probe; when that probe passes, the round is
// refuted and every paused breaker closes. Those closes started the
// recovery ramp like the end of an outage: measured in e2e
// TestSickEgressDoesNotStopTheFleet, the healthy nodes delivered 15, 15,
// 32, 52 tasks in the seconds after one node's egress broke, against about
// 68 a second given (queue/RECOVERY.md, "No ramp after a refuted check").
func (f *queueForwarder) refutedEpisode(k breakerpool.Key) bool {
	f.mu.Lock()
	e, ok := f.episodes[k]
	delete(f.episodes, k)
	f.mu.Unlock()
	if !ok || e.failed || f.hints == nil {
		return false
	}
	p := f.hints.p.Load()
	if p == nil {
		return false
	}
	ci, ok := p.Confirmation(k)
	return ok && ci.Outcome == hintpolicy.ConfirmRefuted && !ci.At.Before(e.since)
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
	exec   *transport.Executor
	queue  *queue.Queue
	fenced *pgstore.FencedOwnership // postgres store only: closed after the queue
	// delegate makes refused calls through a peer, and peers' calls
	// (delegate.go).
	delegate *delegation
}

// startDeliveries builds the executor and the queue over the replicated task
// table and starts reading the shards in owned.
func (n *Node) startDeliveries(owned queue.Ownership, policy *transport.Policy) (*deliveries, error) {
	exec, err := transport.New(transport.Options{Logger: n.log.With("component", "outbound"), Registerer: n.reg, Policy: policy, Series: n.pool, LocalAddr: n.cfg.OutboundSourceAddr})
	if err != nil {
		return nil, err
	}
	var store queue.Store = NewTaskStore(n.store, n.cfg.NodeID)
	var fenced *pgstore.FencedOwnership
	if n.pg != nil {
		// Every owner write is fenced in the database: a shard is read
		// only once its epoch is acquired there (pgstore/DESIGN.md).
		store = n.pg.store.ForQueue() // its depth gauge's count reused 1 s
		fenced = pgstore.NewFencedOwnership(owned, n.pg.store, n.cfg.NodeID, n.log.With("component", "pgstore"))
		fenced.Reachable = func() bool { return !n.pg.failing() } // pghealth.go
		owned = fenced
	}
	resolver := endpointResolver{endpoints: n.state, sync: n.store.Sync}
	deleg, err := newDelegation(n, exec, policy, resolver)
	if err != nil {
		_ = exec.Close()
		return nil, err
	}
	q, err := queue.New(queue.Config{NodeID: n.cfg.NodeID}, queue.Deps{
		Store:      store,
		Ownership:  owned,
		Limits:     queue.DynamicLimits(n.config),
		Breakers:   queue.PoolBreakers(n.pool),
		Executor:   exec,
		Resolver:   resolver,
		Policy:     policy,
		Fleet:      fleetShare{n.members},
		Delegate:   deleg,
		Registerer: n.reg,
		Logger:     n.log.With("component", "queue"),
	})
	if err != nil {
		if fenced != nil {
			fenced.Close()
		}
		_ = exec.Close()
		return nil, err
	}
	q.Start()
	n.members.SetBacklogSource(queueBacklogs{q}) // the fleet budget's gossip (node/fleet.go)
	n.queueFwd.pool.Store(n.pool)
	n.queueFwd.q.Store(q)
	return &deliveries{exec: exec, queue: q, fenced: fenced, delegate: deleg}, nil
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

// close stops the queue (if stopQueue has not), ends the shard acquires
// under way and closes the executor's connections.
func (d *deliveries) close() error {
	if d == nil {
		return nil
	}
	err := d.queue.Close()
	if d.fenced != nil {
		d.fenced.Close()
	}
	return errors.Join(err, d.exec.Close())
}
