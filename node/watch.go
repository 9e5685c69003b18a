package node

import (
	"context"
	"time"

	"fusebox/breakerpool"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// forcedRecheck is the backstop period of the forced-breaker watcher: a
// forced open with an end time is re-applied until it expires even if no
// Raft write wakes the watcher.
const forcedRecheck = 5 * time.Second

// watchConfig feeds the replicated config table into the live collection
// that the breaker pool and the queue's limiters subscribe to.
func (n *Node) watchConfig(ctx context.Context) {
	ch, cancel := n.state.Subscribe(state.TableConfig)
	defer cancel()
	for {
		n.syncConfig()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// watchForcedBreakers applies the operator's cluster-wide forced states from
// Raft to this node's pool: open (until a deadline or cleared), closed, and
// back to automatic when the row disappears.
func (n *Node) watchForcedBreakers(ctx context.Context) {
	ch, cancel := n.state.Subscribe(state.TableForcedBreakers)
	defer cancel()
	t := time.NewTicker(forcedRecheck)
	defer t.Stop()
	for {
		n.syncForced()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-t.C:
		}
	}
}

// syncDerived brings what this node derives from the replicated state up
// to it: ownership.Config.CaughtUp, called after a read barrier and before
// the node makes calls again. The watchers above do the same a few
// milliseconds after each change; without this, a node that had just
// caught up dispatched its first calls on the config it had before
// (nothing, for a process restarted on a log with no snapshot).
func (n *Node) syncDerived() {
	n.syncConfig()
	n.syncForced()
}

// syncConfig sets the config collection from the replicated table. The
// lock keeps one caller's older read from landing after another's newer
// one (the watcher and syncDerived run on different goroutines).
func (n *Node) syncConfig() {
	n.configMu.Lock()
	defer n.configMu.Unlock()
	n.config.Update(configEntries(n.state.Config()))
}

// syncForced applies the forced-breaker rows not yet applied here
// (applyForced only reads its argument, so the first call's nil map is
// "nothing applied yet").
func (n *Node) syncForced() {
	n.forcedMu.Lock()
	defer n.forcedMu.Unlock()
	n.forcedApplied = n.applyForced(n.forcedApplied)
}

func (n *Node) applyForced(prev map[breakerpool.Key]uint64) map[breakerpool.Key]uint64 {
	now := time.Now()
	next := make(map[breakerpool.Key]uint64)
	for _, f := range n.state.ForcedBreakers() {
		// Rows written before callback keys were scheme://host (with a
		// full URL) apply to their host's breaker.
		k := breakerpool.Key{TaskGroup: f.TaskGroup, NamespaceID: f.NamespaceID,
			Destination: transport.BreakerDestination(f.TaskGroup, f.Destination)}
		if !f.Until.IsZero() && !now.Before(f.Until) {
			continue // expired: treated as cleared below
		}
		next[k] = f.Index
		if prev[k] == f.Index && !n.forcedOpenRunningOut(k, f) {
			continue // already applied this version
		}
		b := n.pool.Get(k)
		switch f.Mode {
		case state.ForceOpen:
			d := breakerpool.DefaultMaxOpenFor
			if !f.Until.IsZero() {
				d = f.Until.Sub(now)
			}
			b.OpenFor(d, breakerpool.SourceOperator)
		case state.ForceClosed:
			b.ForceClosed(breakerpool.SourceOperator)
		}
		n.log.Info("breaker forced by operator", "key", k.String(), "mode", f.Mode, "until", f.Until, "reason", f.Reason)
	}
	for k := range prev {
		if _, still := next[k]; still {
			continue
		}
		if b, ok := n.pool.Lookup(k); ok {
			b.Auto(breakerpool.SourceOperator)
			n.log.Info("breaker force cleared", "key", k.String())
		}
	}
	return next
}

// forcedOpenRunningOut: a forced open with no end time is an OpenFor of the
// pool's maximum, renewed here while less than half of it remains, so it
// lasts until an operator clears it.
func (n *Node) forcedOpenRunningOut(k breakerpool.Key, f state.ForcedBreaker) bool {
	if f.Mode != state.ForceOpen || !f.Until.IsZero() {
		return false
	}
	b, ok := n.pool.Lookup(k)
	if !ok {
		return true
	}
	st := b.Status()
	return st.Mode != breakerpool.ModeForcedOpen || st.OpenRemaining < breakerpool.DefaultMaxOpenFor/2
}
