// Package ownership runs shard ownership end to end on one node: as Raft
// leader it places shards on the live members and commits versioned shard
// maps; on every node it follows the committed map, tells the queue which
// shards (and epochs) this node owns, drains the node before shutdown and
// serves the admin operations (move, unpin, close, drain).
//
// See DESIGN.md for the decisions that matter.
package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// Defaults for Config.
const (
	DefaultBackstop = 5 * time.Second
	// DefaultFreshCheck is how often the node re-checks that its copy of
	// the shard map is current (see Manager.Owned).
	DefaultFreshCheck   = 50 * time.Millisecond
	DefaultDrainTimeout = 30 * time.Second
	// DefaultAdminWait bounds how long Move and CloseShard wait for the
	// leader to re-place the shard before answering with the state so far.
	DefaultAdminWait = 10 * time.Second
	// DefaultHandOverWait bounds how long the leader waits for a live
	// owner to hand its shards over before a planned move (handover.go).
	DefaultHandOverWait = 2 * time.Second
)

// Config configures a Manager.
type Config struct {
	// NodeID is this node's id (its gossip name and Raft server id).
	NodeID string
	// Shards is this node's --shards: the shard count the cluster is created
	// with if it has none yet. A cluster created with another count makes
	// the node not ready (see Ready).
	Shards int
	// Backstop is the period of the leader's re-placement and of the node's
	// re-read of the committed map, on top of the event-driven wake-ups
	// (default 5s).
	Backstop time.Duration
	// FreshCheck is the period of the freshness check (default 50ms).
	FreshCheck time.Duration
	// DrainTimeout bounds Drain (default 30s).
	DrainTimeout time.Duration
	// AdminWait bounds how long Move and CloseShard wait for the new owner
	// (default 10s).
	AdminWait time.Duration
	// Stats, if set, reports a shard's task backlog and ack level for
	// describe; without it they are reported as not tracked.
	Stats func(shard int) (backlog int, ackLevel uint64, ok bool)
	// CaughtUp, if set, is called by the watch goroutine after a read
	// barrier succeeded and before the node counts as fresh again (and so
	// before any call): the node brings what it derives from the replicated
	// state — the dynamic config, the forced breakers — up to that state.
	// Their watchers follow it asynchronously, and a node (re)started on a
	// log with no snapshot applies the config only while it catches up: a
	// few milliseconds behind, its first calls ran with no rate limit and no
	// fleet budget (TestChaosFleetBudgetNodeDies, 59 calls in a second
	// against a budget of 40). It must not block for long.
	CaughtUp func()
	// HandOver, if set, asks a live member (its id and HTTP address) to
	// hand shards (id → epoch) over before the leader moves them away
	// from it: no call starts on them, the calls under way end and their
	// results are written (handover.go). It returns when that is done, or
	// when wait ends; the shards stay held for hold if no move comes.
	HandOver func(ctx context.Context, node, httpAddr string, shards map[int]uint64, wait, hold time.Duration) error
	// HandOverWait bounds the leader's wait for a hand-over (default 2s).
	HandOverWait time.Duration
	// Unfit, if set, names the members that may not own shards now and
	// why (a node that cannot reach the task store). The leader asks it
	// before each placement, so it may do I/O bounded by ctx; a set that
	// would leave no member is ignored.
	Unfit func(ctx context.Context) map[string]string
	// StoreFences, if set, reads the task store's fence of each shard
	// (owner and epoch of its last acquire: the PostgreSQL store's
	// fusebox_shards). The leader raises the map's epoch of a shard whose
	// fence is ahead of the map past it (fences.go). It may do I/O; the
	// leader bounds it by a second and places without it on an error.
	StoreFences func(ctx context.Context) (map[int]shardmap.Assignment, error)
	// Logger nil discards; Registerer nil registers no metrics.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (c *Config) setDefaults() error {
	if c.NodeID == "" {
		return errors.New("ownership: Config.NodeID is required")
	}
	if c.Shards < 1 || c.Shards > state.MaxShardCount || c.Shards > shardmap.MaxShards {
		return fmt.Errorf("ownership: Config.Shards %d: must be between 1 and %d", c.Shards, state.MaxShardCount)
	}
	if c.Backstop < 0 || c.DrainTimeout < 0 || c.AdminWait < 0 || c.HandOverWait < 0 {
		return errors.New("ownership: Config.Backstop, DrainTimeout, AdminWait and HandOverWait must not be negative")
	}
	if c.HandOverWait == 0 {
		c.HandOverWait = DefaultHandOverWait
	}
	if c.FreshCheck <= 0 {
		c.FreshCheck = DefaultFreshCheck
	}
	if c.Backstop == 0 {
		c.Backstop = DefaultBackstop
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.AdminWait == 0 {
		c.AdminWait = DefaultAdminWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Store is the Raft node and the replicated state's writes as ownership
// uses them (*raftstore.Store). Its reads are ShardState.
type Store interface {
	// OnLeader registers fn to run while this node leads, after its barrier.
	OnLeader(fn func(ctx context.Context))
	WaitForApplied(ctx context.Context, index uint64) error
	// InContact: this node leads, or knows a leader and (maxLag > 0) heard
	// from it within maxLag. CaughtUp: in contact and every committed
	// entry applied.
	InContact(maxLag time.Duration) bool
	CaughtUp(maxLag time.Duration) bool
	// FreshLag is the longest gap between two freshness checks that is not
	// taken for a stopped process; ContactLag the oldest contact with the
	// leader under which a follower still calls.
	FreshLag() time.Duration
	ContactLag() time.Duration
	// RaftUnreachable: this node leads, and its Raft heartbeats to the
	// server have failed for a while (the store's reap timeout).
	RaftUnreachable(id string) bool
	// Sync commits a no-op through the leader and waits until it is
	// applied locally (a read barrier).
	Sync(ctx context.Context) error

	SetShardCount(ctx context.Context, c state.SetShardCountCommand) (int, error)
	CommitShardMap(ctx context.Context, c state.CommitShardMapCommand) (uint64, error)
	SetShardPin(ctx context.Context, c state.SetShardPinCommand) (uint64, error)
	ReleaseShard(ctx context.Context, c state.ReleaseShardCommand) (uint64, error)
	SetDrainingNode(ctx context.Context, c state.SetDrainingNodeCommand) (uint64, error)
}

// ShardState is what ownership reads of the replicated state: the local
// replica, stale-OK (raftstore/state.State, through
// raftstore.Store.Reader). Subscribe wakes, coalesced, after a change to
// table.
type ShardState interface {
	Subscribe(table state.Table) (<-chan struct{}, func())
	ShardCount() int
	ShardMap() *shardmap.Map
	DrainingNodes() []state.DrainingNode
	// ClusterID is the id of this Raft history: members advertising
	// another get no shards (raftstore.Member.Foreign).
	ClusterID() string
}

// Members is the gossip membership (the node's adapter over cluster, the
// same view the Raft store reconciles from). Subscribe wakes, coalesced, on
// any change; the channel may be closed when the membership shuts down.
type Members interface {
	Members() []raftstore.Member
	Subscribe() (<-chan struct{}, func())
}
