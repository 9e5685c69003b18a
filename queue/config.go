package queue

import (
	"fmt"
	"time"
)

// Config defaults.
const (
	DefaultFlushInterval       = 10 * time.Millisecond
	DefaultMaxFlushBatch       = 256
	DefaultMaxPendingPerShard  = 1000
	DefaultRejectRetry         = 250 * time.Millisecond
	DefaultDrainTimeout        = 10 * time.Second
	DefaultFlushTimeout        = 5 * time.Second
	DefaultGroupIdleTTL        = 5 * time.Minute
	DefaultMaxUnexpectedErrors = 70 // Temporal's history.TaskDLQUnexpectedErrorAttempts, when the limits carry none
	DefaultFlushRetryMax       = 2 * time.Second
	DefaultFullReadBackstop    = 2 * time.Second
	DefaultDeferAfter          = 2 * time.Second
)

// Config tunes a Queue. The zero value is usable: zero fields take the
// defaults above; negative values are errors.
type Config struct {
	// NodeID names this node in logs.
	NodeID string
	// FlushInterval is how long a shard collects results before writing
	// them; MaxFlushBatch results are written at once without waiting.
	FlushInterval time.Duration
	MaxFlushBatch int
	// MaxPendingPerShard bounds the tasks a shard has dispatched, parked or
	// awaiting their write; the reader stops loading at the bound.
	MaxPendingPerShard int
	// RejectRetry bounds how long a task refused by a full group buffer is
	// held (in memory, in flight) before its shard reader offers it again;
	// normally the group's room signal comes first. It is also the pause of
	// a task released unstarted (out of contact, rate-limit race, abort).
	RejectRetry time.Duration
	// DrainTimeout is how long Close lets in-flight calls finish before
	// cancelling them; FlushTimeout bounds the last result write.
	DrainTimeout time.Duration
	FlushTimeout time.Duration
	// GroupIdleTTL is how long an idle scheduler group is kept;
	// GCInterval is the period of the sweep (0: GroupIdleTTL/2).
	GroupIdleTTL time.Duration
	GCInterval   time.Duration
	// MaxUnexpectedErrors unexpected errors send a task to the DLQ. 0 reads
	// history.TaskDLQUnexpectedErrorAttempts from the live limits (default
	// 70) at every error; a positive value overrides it.
	MaxUnexpectedErrors int
	// RescheduleBase is the first delay after an unexpected error, growing
	// ×1.1 an error up to 3 min (RescheduleBackoff). 0 is Temporal's 1 s,
	// which is not configurable there either; tests shorten it.
	RescheduleBase time.Duration
	// MaxAttempts, when > 0, ends a task failed once that many attempts
	// found its destination down. 0 retries until the task succeeds.
	MaxAttempts int
	// FullReadBackstop is the period of a shard reader's full read when
	// the store reports the tasks committed behind its read cursor
	// (DueLowStore): a safety net only, which tests set long to show that
	// reads do not depend on it. Without such a store the period is 100 ms
	// (fullReadEvery), and this is not used.
	FullReadBackstop time.Duration
	// DeferAfter: when a shard's window (MaxPendingPerShard) is full, a held
	// task of a rate-limited key whose turn at the key's rate is further
	// away than this is written back due at that turn (defer.go), so that
	// one destination's burst does not hold back the shard's others.
	DeferAfter time.Duration
	// DestinationShare is how many of a shard's tasks one destination (all
	// its namespaces and task groups) may have dispatched at once; beyond
	// it its tasks are held, and deferred once the window is full
	// (share.go). 0 is half of MaxPendingPerShard.
	DestinationShare int
}

func (c Config) withDefaults() (Config, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"FlushInterval", int64(c.FlushInterval)}, {"MaxFlushBatch", int64(c.MaxFlushBatch)},
		{"MaxPendingPerShard", int64(c.MaxPendingPerShard)}, {"RejectRetry", int64(c.RejectRetry)},
		{"DrainTimeout", int64(c.DrainTimeout)}, {"FlushTimeout", int64(c.FlushTimeout)},
		{"GroupIdleTTL", int64(c.GroupIdleTTL)}, {"GCInterval", int64(c.GCInterval)},
		{"MaxUnexpectedErrors", int64(c.MaxUnexpectedErrors)}, {"MaxAttempts", int64(c.MaxAttempts)},
		{"FullReadBackstop", int64(c.FullReadBackstop)}, {"DeferAfter", int64(c.DeferAfter)},
		{"RescheduleBase", int64(c.RescheduleBase)}, {"DestinationShare", int64(c.DestinationShare)},
	} {
		if f.v < 0 {
			return c, fmt.Errorf("queue: Config.%s must not be negative, got %d", f.name, f.v)
		}
	}
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.FlushInterval, DefaultFlushInterval)
	def(&c.RejectRetry, DefaultRejectRetry)
	def(&c.DrainTimeout, DefaultDrainTimeout)
	def(&c.FlushTimeout, DefaultFlushTimeout)
	def(&c.GroupIdleTTL, DefaultGroupIdleTTL)
	def(&c.GCInterval, max(c.GroupIdleTTL/2, 10*time.Millisecond))
	def(&c.FullReadBackstop, DefaultFullReadBackstop)
	def(&c.DeferAfter, DefaultDeferAfter)
	def(&c.RescheduleBase, RescheduleBase)
	if c.MaxFlushBatch == 0 {
		c.MaxFlushBatch = DefaultMaxFlushBatch
	}
	if c.MaxPendingPerShard == 0 {
		c.MaxPendingPerShard = DefaultMaxPendingPerShard
	}
	if c.DestinationShare == 0 {
		c.DestinationShare = max(c.MaxPendingPerShard/2, 1)
	}
	return c, nil
}
