package pgstore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"fusebox/queue"
)

// Acquirer raises a shard's epoch in the database (*Store).
type Acquirer interface {
	Acquire(ctx context.Context, shard int, node string, epoch uint64) error
}

// FencedOwnership is the queue's Ownership for the postgres store: a shard
// the committed (Raft) map gives this node is handed to the queue only once
// its epoch is acquired in the database, so every write of the owner is
// fenced there. A shard whose acquire failed (database unreachable, or a
// higher epoch already taken: this node's map is stale) is held back and
// retried after RetryAfter, or at the map's next change.
type FencedOwnership struct {
	inner queue.Ownership
	acq   Acquirer
	node  string
	log   *slog.Logger
	// RetryAfter is the delay before a failed acquire is tried again
	// (default 1s).
	RetryAfter time.Duration
	// Reachable, if set, is false while this node cannot reach the
	// database (node/pghealth.go): Fresh is false then, so no call starts
	// whose result could not be written — the shard's next owner would
	// only make it again. Set it before the queue starts.
	Reachable func() bool

	mu       sync.Mutex
	acquired map[int]uint64
}

var (
	_ queue.FreshOwnership = (*FencedOwnership)(nil)
	_ queue.EpochOwnership = (*FencedOwnership)(nil)
)

// NewFencedOwnership wraps inner (the shard map's ownership of node).
func NewFencedOwnership(inner queue.Ownership, acq Acquirer, node string, log *slog.Logger) *FencedOwnership {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FencedOwnership{inner: inner, acq: acq, node: node, log: log, RetryAfter: time.Second, acquired: make(map[int]uint64)}
}

// Watch implements queue.Ownership.
func (f *FencedOwnership) Watch() (map[int]uint64, <-chan struct{}) {
	owned, changed := f.inner.Watch()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]uint64, len(owned))
	failed := false
	for shard, epoch := range owned {
		if f.acquired[shard] == epoch {
			out[shard] = epoch
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f.acq.Acquire(ctx, shard, f.node, epoch)
		cancel()
		if err != nil {
			failed = true
			f.log.Warn("shard not taken: its epoch could not be raised in the database", "shard", shard, "epoch", epoch, "err", err)
			continue
		}
		f.acquired[shard] = epoch
		out[shard] = epoch
	}
	for shard := range f.acquired {
		if _, ok := owned[shard]; !ok {
			delete(f.acquired, shard)
		}
	}
	if !failed {
		return out, changed
	}
	// Wake the queue for a retry even if the map does not change. The
	// goroutine ends at the first of the two.
	retry := make(chan struct{})
	go func() {
		t := time.NewTimer(f.RetryAfter)
		defer t.Stop()
		select {
		case <-changed:
		case <-t.C:
		}
		close(retry)
	}()
	return out, retry
}

// OwnsAt implements queue.EpochOwnership: the inner ownership's answer, or
// true when it cannot tell (the database's fence still refuses the
// writes of a stale owner).
func (f *FencedOwnership) OwnsAt(shard int, epoch uint64) bool {
	if eo, ok := f.inner.(queue.EpochOwnership); ok {
		return eo.OwnsAt(shard, epoch)
	}
	return true
}

// Fresh implements queue.FreshOwnership: false while Reachable says the
// database is not, else the inner ownership's answer, or true when it
// cannot tell.
func (f *FencedOwnership) Fresh() bool {
	if f.Reachable != nil && !f.Reachable() {
		return false
	}
	if fo, ok := f.inner.(queue.FreshOwnership); ok {
		return fo.Fresh()
	}
	return true
}
