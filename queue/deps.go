package queue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/shardmap"
	"fusebox/transport"
)

// Store is the replicated task table as the queue uses it. Every node has a
// full local copy to read; Complete is a replicated (Raft) write.
type Store interface {
	// Due returns up to limit pending tasks of shard whose NextAttemptAt is
	// in [from, now] (from zero: not after now), earliest NextAttemptAt
	// first. Tasks for which skip returns true (already in flight on this
	// node) are passed over and do not count towards limit. skip is called
	// with the store's read view open and must not call back into the store.
	// When the store's walk went past now before reaching limit, known is
	// true and next is what NextDue(shard, now) would return (zero: none),
	// which spares the reader that second lookup.
	Due(shard int, from, now time.Time, limit int, skip func(id string) bool) (tasks []Task, next time.Time, known bool)
	// NextDue returns the earliest NextAttemptAt after `after` among the
	// shard's pending tasks; ok is false when there is none.
	NextDue(shard int, after time.Time) (next time.Time, ok bool)
	// Backlog returns the number of pending tasks of shard.
	Backlog(shard int) int
	// Subscribe returns a channel that receives (coalesced, never blocking
	// the store) after tasks are added or changed, and a cancel func.
	Subscribe() (ch <-chan struct{}, cancel func())
	// Complete applies results in one epoch-fenced write. A stale epoch
	// refuses the whole batch with a *shardmap.WrongOwnerError. Results for
	// unknown or already terminal tasks are ignored.
	Complete(ctx context.Context, shard int, epoch uint64, results []Result) error
}

// ContextDueStore is an optional Store interface for a store whose reads go
// over the network (a database): DueContext is Due bounded by ctx. A
// shard's reader calls it without holding the shard's lock, with the
// shard's context, so a read the database is slow to answer, or never
// answers, holds up neither the shard's calls nor the recording of their
// results, and the shard's loss (a move) cancels it at once. skip is then
// called with no lock of the store held and may take the reader's own.
// (Due, held under the shard's lock, is for stores that read memory.)
type ContextDueStore interface {
	DueContext(ctx context.Context, shard int, from, now time.Time, limit int, skip func(id string) bool) (tasks []Task, next time.Time, known bool)
}

// ContextWalkStore is an optional BlockedStore and LaterStore interface
// for a database store: the release walks' and recalls' reads bounded by
// ctx. They run under the shard's lock; the shard's loss and the queue's
// Close cancel ctx before they take that lock, so a read the database
// does not answer ends at once instead of at its timeout.
type ContextWalkStore interface {
	BlockedContext(ctx context.Context, shard int, k breakerpool.Key, after Cursor, limit int, skip func(id string) bool) (tasks []Task, last Cursor, done bool)
	LaterContext(ctx context.Context, shard int, k breakerpool.Key, after Cursor, until time.Time, limit int, skip func(id string) bool) (tasks []Task, last Cursor, done bool)
}

// ShardSubscriber is an optional Store interface: a subscription woken
// (coalesced, never blocking the store) for changes to one shard, and for
// changes the store cannot place. A shard's reader uses it when the store
// has it, so a write to one shard does not wake every reader (a database
// store's reader queries per wake-up).
type ShardSubscriber interface {
	SubscribeShard(shard int) (ch <-chan struct{}, cancel func())
}

// DueLowStore is an optional Store interface: TakeDueLow returns the
// earliest NextAttemptAt of the tasks that entered shard's due order (were
// added, or had their due time moved) since the previous call for the
// shard, and forgets it; ok is false when none did. The store records a
// task's low after Due can return the task and before it wakes the
// shard's subscribers. A reader whose store has it starts each read at its
// cursor, or at that low when it is earlier, instead of a lag window
// before the cursor, and reads the whole shard only as a rare backstop
// (DESIGN.md, "Read cursor"). One reader per shard takes the lows.
type DueLowStore interface {
	TakeDueLow(shard int) (low time.Time, ok bool)
}

// DueLowTracker is an optional DueLowStore interface for a store whose
// reports can lapse: a database store hears of the other nodes' writes
// through notifications, and hears nothing while its listening
// connection is down. While DueLowsTracked is false a reader reads as
// with a store that has no reports (from cursorLag before its cursor,
// and the whole shard every 100 ms). A store whose tracking resumes
// makes each shard's next report a full read (a zero low, ok), which
// finds what was committed while it did not track.
type DueLowTracker interface {
	DueLowsTracked() bool
}

// Ownership tells which shards this node owns, from the committed shard map.
type Ownership interface {
	// Watch returns shard → epoch for every shard this node owns, and a
	// channel closed by the next change.
	Watch() (owned map[int]uint64, changed <-chan struct{})
}

// FreshOwnership is an Ownership that can also say, at the moment of a
// call, whether this node's copy of the shard map is still current (it has
// not lost contact with the cluster). The queue checks it right before each
// call so a node resumed after a long pause does not call destinations for
// shards it has lost in the meantime, even before its watchers wake up.
type FreshOwnership interface {
	Ownership
	Fresh() bool
}

// EpochOwnership is an Ownership that can also say, at the moment of a
// call, whether this node owns shard at epoch in its current copy of the
// shard map. The queue asks before each call, with Fresh: a shard that
// moved away in a map this node already holds makes no call in the moment
// before Watch's change reaches the queue (a restarted node started its
// shards from the map on its disk, caught up on a newer one, and called
// for shards it no longer owned: a duplicate of the owner's call).
type EpochOwnership interface {
	OwnsAt(shard int, epoch uint64) bool
}

// RefusalOwnership is an Ownership told of the store's refusal of a
// shard's result write (*shardmap.WrongOwnerError, carrying the store's
// fence of the shard). The queue stops the shard either way; again true
// means the ownership will hand it over afresh at the same epoch once it
// has taken it again, so the queue watches at once instead of keeping the
// stopped shard until its epoch changes. pgstore.FencedOwnership says so
// when the fence went back below the epoch it had raised it to (the
// database lost the acquire: a failover that lost commits, a restored
// backup), where no newer owner exists and the map will not move.
type RefusalOwnership interface {
	Refused(shard int, epoch uint64, fence *shardmap.WrongOwnerError) (again bool)
}

// Limits are the queue's dynamic limits (dynconfig's Snapshot has them all).
type Limits interface {
	// BatchSize is how many tasks a shard reader loads at once; 0 stops
	// reading.
	BatchSize() int
	BufferSize(namespaceID, destination string) int
	Concurrency(namespaceID, destination string) int
	MaxTaskRPS(namespaceID, destination string) float64
	RequestTimeout(taskGroup, namespaceID, destination string) time.Duration
}

// OutputLimits is the bound a Limits may also carry (*dynconfig.Snapshot
// does) on a sync start's output as stored (fusebox.tasks.maxOutputBytes);
// without it the transport's MaxOutputBytes applies.
type OutputLimits interface {
	MaxOutputBytes(namespaceID, destination string) int
}

// LimitsSource serves the current Limits and tells when they change.
type LimitsSource interface {
	Current() Limits
	// Subscribe registers fn, called (never concurrently) after the limits
	// may have changed; cancel is idempotent.
	Subscribe(fn func()) (cancel func())
}

// Breakers returns the breaker of a key.
type Breakers interface {
	Breaker(k breakerpool.Key) breakerpool.TwoStepCircuitBreaker
}

// Executor makes one outbound call (*transport.Executor).
type Executor interface {
	Execute(ctx context.Context, r transport.Request) (transport.Result, error)
}

// Resolver maps a Nexus endpoint name to its target URL. An endpoint that
// does not exist must be reported with an error wrapping ErrUnknownEndpoint;
// any other error is treated as transient.
type Resolver interface {
	ResolveEndpoint(name string) (url string, err error)
}

// ErrUnknownEndpoint is wrapped by a Resolver's error for an endpoint that
// is not registered.
var ErrUnknownEndpoint = errors.New("unknown nexus endpoint")

// DestinationPolicy is the destination allowlist (*transport.Policy):
// Allowed reports why rawURL may not be called for namespace, or nil.
type DestinationPolicy interface {
	Allowed(namespace, rawURL string) error
}

// Deps are the queue's collaborators. Store, Ownership, Limits, Breakers
// and Executor are required; Resolver may be nil (Nexus requests then carry
// their URL); Registerer nil registers no metrics; Logger nil discards.
type Deps struct {
	Store     Store
	Ownership Ownership
	Limits    LimitsSource
	Breakers  Breakers
	Executor  Executor
	Resolver  Resolver
	// Policy, when set, is checked before every attempt; nil allows all.
	Policy DestinationPolicy
	// Fleet, when set, is this node's share of fleet-wide rates (recovery
	// ramp, fleet budget); nil means this node is the whole fleet.
	Fleet FleetShare
	// Delegate, when set, makes the calls this node's own breaker refuses
	// through a peer whose calls to the destination pass (delegate.go).
	Delegate   Delegator
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

func (d Deps) validate() error {
	switch {
	case d.Store == nil:
		return errors.New("queue: Deps.Store is required")
	case d.Ownership == nil:
		return errors.New("queue: Deps.Ownership is required")
	case d.Limits == nil:
		return errors.New("queue: Deps.Limits is required")
	case d.Breakers == nil:
		return errors.New("queue: Deps.Breakers is required")
	case d.Executor == nil:
		return errors.New("queue: Deps.Executor is required")
	}
	return nil
}

// PoolBreakers adapts a breaker pool to Breakers.
func PoolBreakers(p *breakerpool.Pool) Breakers { return poolBreakers{p} }

type poolBreakers struct{ p *breakerpool.Pool }

func (b poolBreakers) Breaker(k breakerpool.Key) breakerpool.TwoStepCircuitBreaker { return b.p.Get(k) }

// DynamicLimits adapts a dynamic-config collection to LimitsSource.
func DynamicLimits(c *dynconfig.Collection) LimitsSource { return dynLimits{c} }

type dynLimits struct{ c *dynconfig.Collection }

func (d dynLimits) Current() Limits                     { return d.c.Current() }
func (d dynLimits) Subscribe(fn func()) (cancel func()) { return d.c.Subscribe(fn) }
