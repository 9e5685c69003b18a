package pgstore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"fusebox/queue"
	"fusebox/shardmap"
)

// Acquirer raises a shard's epoch in the database (*Store).
type Acquirer interface {
	Acquire(ctx context.Context, shard int, node string, epoch uint64) error
}

// acquireTimeout bounds one Acquire.
const acquireTimeout = 5 * time.Second

// acquireParallel bounds the acquires in flight: a node given many shards
// at once (its first start, a peer's loss) raises their epochs a few at a
// time rather than taking every connection of its pool.
const acquireParallel = 4

// FencedOwnership is the queue's Ownership for the postgres store: a shard
// the committed (Raft) map gives this node is handed to the queue only once
// its epoch is acquired in the database, so every write of the owner is
// fenced there. A shard whose acquire failed (database unreachable, or a
// higher epoch already taken: this node's map is stale) is held back and
// retried after RetryAfter, or at the map's next change.
//
// Acquires run in the background: Watch never waits for the database. It
// hands over the shards acquired so far at their map epoch and starts the
// acquires still needed; the channel it returns also closes when one of
// them ends. So a shard the map moves away is dropped at once even while
// the acquires of new ones hang (they were made one after the other inside
// Watch, up to 5 s each, and the moved shard kept working meanwhile).
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

	ctx    context.Context // cancelled by Close: ends the acquires under way
	cancel context.CancelFunc
	sem    chan struct{} // acquireParallel slots
	wg     sync.WaitGroup

	mu       sync.Mutex
	acquired map[int]uint64    // shard → epoch raised in the database
	pending  map[int]bool      // shards whose acquire is under way
	failed   map[int]failedAcq // shard → its last failed acquire
	ended    chan struct{}     // closed, and replaced, when an acquire ends
}

// failedAcq is an acquire that failed: not tried again at the same epoch
// before at+RetryAfter.
type failedAcq struct {
	epoch uint64
	at    time.Time
}

var (
	_ queue.FreshOwnership   = (*FencedOwnership)(nil)
	_ queue.EpochOwnership   = (*FencedOwnership)(nil)
	_ queue.RefusalOwnership = (*FencedOwnership)(nil)
)

// NewFencedOwnership wraps inner (the shard map's ownership of node). Close
// ends the acquires it starts.
func NewFencedOwnership(inner queue.Ownership, acq Acquirer, node string, log *slog.Logger) *FencedOwnership {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &FencedOwnership{inner: inner, acq: acq, node: node, log: log, RetryAfter: time.Second,
		ctx: ctx, cancel: cancel, sem: make(chan struct{}, acquireParallel),
		acquired: make(map[int]uint64), pending: make(map[int]bool), failed: make(map[int]failedAcq),
		ended: make(chan struct{})}
}

// Watch implements queue.Ownership: the shards of the map whose epoch is
// acquired, and a channel closed at the map's next change, when an acquire
// started here ends, or when a failed one is due again.
func (f *FencedOwnership) Watch() (map[int]uint64, <-chan struct{}) {
	owned, changed := f.inner.Watch()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]uint64, len(owned))
	now := time.Now()
	retry := time.Duration(-1) // until the first failed acquire is due
	for shard, epoch := range owned {
		if f.acquired[shard] == epoch {
			out[shard] = epoch
			continue
		}
		if f.pending[shard] {
			continue // its end wakes the queue; a newer epoch is tried then
		}
		if fl, ok := f.failed[shard]; ok && fl.epoch == epoch {
			if wait := fl.at.Add(f.RetryAfter).Sub(now); wait > 0 {
				if retry < 0 || wait < retry {
					retry = wait
				}
				continue
			}
		}
		f.start(shard, epoch)
	}
	for shard := range f.acquired {
		if _, ok := owned[shard]; !ok {
			delete(f.acquired, shard)
		}
	}
	for shard := range f.failed {
		if _, ok := owned[shard]; !ok {
			delete(f.failed, shard)
		}
	}
	if (len(f.pending) == 0 && retry < 0) || f.ctx.Err() != nil {
		return out, changed // closed: nothing more to wake for
	}
	// Wake the queue at the first of: the map changes, an acquire ends, a
	// failed one is due, Close. The goroutine ends with it.
	wake := make(chan struct{})
	go func(ended <-chan struct{}) {
		var due <-chan time.Time
		if retry >= 0 {
			t := time.NewTimer(retry)
			defer t.Stop()
			due = t.C
		}
		select {
		case <-changed:
		case <-ended:
		case <-due:
		case <-f.ctx.Done():
		}
		close(wake)
	}(f.ended)
	return out, wake
}

// start runs one acquire in the background (f.mu held). None starts after
// Close.
func (f *FencedOwnership) start(shard int, epoch uint64) {
	if f.ctx.Err() != nil {
		return
	}
	f.pending[shard] = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		var err error
		select {
		case f.sem <- struct{}{}:
			ctx, cancel := context.WithTimeout(f.ctx, acquireTimeout)
			err = f.acq.Acquire(ctx, shard, f.node, epoch)
			cancel()
			<-f.sem
		case <-f.ctx.Done():
			err = f.ctx.Err()
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.pending, shard)
		switch {
		case err == nil:
			f.acquired[shard] = epoch
			delete(f.failed, shard)
		case f.ctx.Err() != nil: // closing: nothing to retry
		default:
			f.failed[shard] = failedAcq{epoch: epoch, at: time.Now()}
			f.log.Warn("shard not taken: its epoch could not be raised in the database", "shard", shard, "epoch", epoch, "err", err)
		}
		close(f.ended)
		f.ended = make(chan struct{})
	}()
}

// Close cancels the acquires under way and waits for them; a Watch after it
// starts none. Close is idempotent.
func (f *FencedOwnership) Close() {
	f.cancel()
	f.wg.Wait()
}

// Refused implements queue.RefusalOwnership. A write refused by a newer
// owner's fence (a higher epoch) leaves the shard to the map, which moves
// it. A fence below the epoch this node acquired means the database went
// back — a failover to a standby that had not received the acquire, a
// restored backup: nobody newer holds the shard, and the map, which is
// right, will not move it. The shard is then acquired again at its epoch
// (again true): before, it stayed stopped and its tasks waited for ever.
func (f *FencedOwnership) Refused(shard int, epoch uint64, fence *shardmap.WrongOwnerError) bool {
	if fence == nil || fence.Epoch >= epoch {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.acquired[shard] != epoch {
		return false
	}
	delete(f.acquired, shard)
	f.log.Warn("the database's fence of a shard went back below the epoch this node raised it to (a failover that lost commits, or a restored backup): taking the shard again",
		"shard", shard, "epoch", epoch, "database_owner", fence.Owner, "database_epoch", fence.Epoch)
	return true
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
