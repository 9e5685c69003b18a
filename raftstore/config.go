package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"fusebox/raftstore/state"
)

// Presets.
const (
	PresetLAN  = "lan"  // raft's own defaults
	PresetFast = "fast" // tight timings for tests on loopback
)

// Config configures a Store. Zero values take the preset's defaults.
type Config struct {
	NodeID        string // raft server id; required
	DataDir       string // holds the log store (raft.db or wal/), snapshots/ and the marker; required
	RaftBindAddr  string // e.g. "127.0.0.1:0"; RaftAddr() reports the bound address
	AdvertiseAddr string // address peers dial (port 0: the bound port); default: the bound address

	// BootstrapExpect: 0 never bootstraps (the node waits to be added by an
	// existing cluster's leader); 1 bootstraps a single-node cluster when
	// there is no existing state; N > 1 waits for N alive members and
	// bootstraps them.
	BootstrapExpect int
	Preset          string // "lan" (default) or "fast"
	// LogStore is the raft log and stable store: LogStoreWAL (default,
	// hashicorp/raft-wal: one fsync per append) or LogStoreBolt
	// (raft-boltdb/v2, the default before; two fsyncs per append). A data
	// dir holding the other one is migrated on start (DESIGN.md, "Log
	// store").
	LogStore string

	// ReapTimeout is how long a failed member stays in the raft configuration
	// before the leader removes it (default 30s lan, 2s fast).
	ReapTimeout time.Duration
	// LogFailFatal is how long the log store may refuse every write before
	// the store fails and the node must stop (logguard.go; default 10s
	// lan, 2.5s fast).
	LogFailFatal time.Duration
	// VoterTarget caps voters; 0 means 3, or 5 once 5+ servers are alive.
	VoterTarget int
	// Stabilization is how long a non-voter must be alive before promotion
	// (default 10s lan, 2×HeartbeatTimeout fast).
	Stabilization time.Duration
	// ReconcileInterval is the leader's backstop reconcile period (10s lan, 1s fast).
	ReconcileInterval time.Duration

	// CommitTimeout is how long after a write, with no other write
	// following, raft tells followers it committed (default 10ms lan, 5ms
	// fast: tasks in this store must reach their owner quickly, see
	// raftConfig). The leader sends every follower an empty append every
	// CommitTimeout to 2×CommitTimeout, written or not: on an idle cluster
	// those are most of the CPU. A cluster whose tasks live elsewhere
	// (PostgreSQL) sets a long one together with PushCommits.
	CommitTimeout time.Duration
	// PushCommits: after each write this node commits as leader, it tells
	// the followers at once (a raft barrier, one in flight, coalescing the
	// writes behind it; push.go) instead of leaving it to CommitTimeout's
	// next empty append. For a cluster whose writes are rare, where it lets
	// CommitTimeout be long without followers applying late.
	PushCommits bool

	SnapshotThreshold uint64        // default: raft's (8192)
	SnapshotInterval  time.Duration // default: raft's (120s)
	TrailingLogs      uint64        // default: raft's (10240)

	// ApplyHoldTimeout bounds how long Apply waits for a leader (default 5s).
	ApplyHoldTimeout time.Duration
	// ApplyTimeout bounds one raft apply enqueue and one forward (default 10s).
	ApplyTimeout time.Duration

	// RejoinEmpty lets a node whose data dir held raft state but lost its
	// log start anyway: before raft starts it asks the leader to remove its
	// old server entry, then rejoins as a non-voter and is promoted once
	// caught up (rejoin.go). Without it New refuses such a data dir. It does
	// nothing when the log is intact.
	RejoinEmpty bool
	// RejoinTimeout bounds how long a rejoin waits for a leader (default 2m).
	RejoinTimeout time.Duration

	HistoryLimit  int    // config_history entries kept (default 1000)
	RequestWindow uint64 // raft indexes a request id is remembered (default 10000)
	// LogVersion is the log version this node advertises, proposes and
	// applies (default BuildLogVersion()); tests set it to run a node "of an
	// older release".
	LogVersion int

	// TLS, when set, runs Raft over mutual TLS (tls_stream.go): peers
	// must present a node certificate from the cluster CA.
	TLS TLSConfigs
	// TLSHandshakeTimeout bounds one Raft TLS handshake (default 5s).
	TLSHandshakeTimeout time.Duration

	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // nil: metrics are not registered
}

// MemberStatus is a member's gossip status.
type MemberStatus int

// Member statuses.
const (
	MemberAlive MemberStatus = iota
	MemberSuspect
	MemberFailed
	MemberLeft
)

func (s MemberStatus) String() string {
	switch s {
	case MemberAlive:
		return "alive"
	case MemberSuspect:
		return "suspect"
	case MemberFailed:
		return "failed"
	case MemberLeft:
		return "left"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Member is a server as the membership layer sees it.
type Member struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	Status   MemberStatus
	// LogVersion is the log version the member advertises; 0 (a build
	// from before log versions) counts as LogVersionBase.
	LogVersion int
	// ClusterID is the Raft history the member's data dir holds, "" when
	// it holds none (a fresh data dir) or does not say (an older build).
	ClusterID string
}

// Foreign reports whether m holds the Raft history of another cluster than
// ours (our state's cluster id, "" before the first leader set it): it
// advertises one, and not ours. A node restarted on another cluster's data
// dir, or pointed at this cluster's --join by mistake, would otherwise be
// added to the Raft configuration and, with a higher term from its own
// history, take the lead: the replicas would apply its entries on top of
// divergent states (node/clusterid.go).
func (m Member) Foreign(ours string) bool { return m.ClusterID != "" && m.ClusterID != ours }

// Members is the membership view the store needs (implemented over memberlist
// by the lead). Subscribe wakes (coalesced) on any membership change.
type Members interface {
	Members() []Member
	Subscribe() (<-chan struct{}, func())
}

// Forwarder sends a write to the leader's HTTP API, which calls ApplyLocal.
type Forwarder interface {
	ForwardApply(ctx context.Context, leaderHTTPAddr string, cmd []byte, requestID string) (*state.ApplyResult, error)
}

// PeerStater optionally tells whether a peer already has raft state. With it,
// BootstrapExpect > 1 skips bootstrapping when any peer is already part of a
// cluster, as Consul's maybeBootstrap does.
type PeerStater interface {
	HasRaftState(ctx context.Context, m Member) (bool, error)
}

// Deps are the store's collaborators. Members is required; Forwarder is
// required for writes on followers; Validator and PeerState are optional.
type Deps struct {
	Members   Members
	Forwarder Forwarder
	Validator state.Validator
	PeerState PeerStater
}

func (c *Config) setDefaults() error {
	if c.NodeID == "" {
		return errors.New("raftstore: Config.NodeID is required")
	}
	if c.DataDir == "" {
		return errors.New("raftstore: Config.DataDir is required")
	}
	if c.LogVersion <= 0 || c.LogVersion > state.LogVersion {
		c.LogVersion = state.BuildLogVersion()
	}
	if c.RaftBindAddr == "" {
		return errors.New("raftstore: Config.RaftBindAddr is required")
	}
	if _, _, err := net.SplitHostPort(c.RaftBindAddr); err != nil {
		return fmt.Errorf("raftstore: Config.RaftBindAddr %q: %w", c.RaftBindAddr, err)
	}
	if c.LogFailFatal < 0 {
		return fmt.Errorf("raftstore: Config.LogFailFatal must not be negative, got %v", c.LogFailFatal)
	}
	if c.BootstrapExpect < 0 {
		return fmt.Errorf("raftstore: Config.BootstrapExpect must be >= 0, got %d", c.BootstrapExpect)
	}
	if c.VoterTarget < 0 || c.VoterTarget == 2 || c.VoterTarget == 4 {
		return fmt.Errorf("raftstore: Config.VoterTarget must be 0 (auto), 1, 3, 5 or more, got %d", c.VoterTarget)
	}
	switch c.LogStore {
	case "":
		c.LogStore = LogStoreWAL
	case LogStoreBolt, LogStoreWAL:
	default:
		return fmt.Errorf("raftstore: Config.LogStore must be %q or %q, got %q", LogStoreBolt, LogStoreWAL, c.LogStore)
	}
	fast := false
	switch c.Preset {
	case "", PresetLAN:
		c.Preset = PresetLAN
	case PresetFast:
		fast = true
	default:
		return fmt.Errorf("raftstore: Config.Preset must be %q or %q, got %q", PresetLAN, PresetFast, c.Preset)
	}
	def := func(d *time.Duration, lan, fst time.Duration) {
		if *d == 0 {
			*d = lan
			if fast {
				*d = fst
			}
		}
	}
	def(&c.ReapTimeout, 30*time.Second, 2*time.Second)
	def(&c.LogFailFatal, 10*time.Second, 2500*time.Millisecond)
	def(&c.Stabilization, 10*time.Second, 500*time.Millisecond)
	def(&c.ReconcileInterval, 10*time.Second, time.Second)
	def(&c.ApplyHoldTimeout, 5*time.Second, 5*time.Second)
	def(&c.ApplyTimeout, 10*time.Second, 10*time.Second)
	def(&c.TLSHandshakeTimeout, 5*time.Second, 5*time.Second)
	def(&c.RejoinTimeout, 2*time.Minute, 2*time.Minute)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// raftConfig builds raft's config from the preset.
func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	// Buffer the apply channel to MaxAppendEntries so concurrent writes are
	// committed as one batch (measured: +8% durable task throughput). Raft's
	// enqueue timeout no longer applies; Apply is bounded by its caller's
	// context and the hold timeout instead.
	rc.BatchApplyCh = true
	// A follower learns that an entry committed from the next AppendEntries,
	// which, when no other write follows, raft sends after a random
	// CommitTimeout to 2×CommitTimeout. Until then a shard owned by a
	// follower cannot see a new task, and a submit answered on a follower
	// waits for it (read-your-writes). With raft's 50 ms, p99 enqueue →
	// delivered at 10 tasks/s was 101 ms; with 10 ms, 22 ms. The cost is
	// those empty appends on an idle cluster: 2.7 % → 4.7 % of one core for
	// three in-process nodes (docs/architecture.md).
	rc.CommitTimeout = 10 * time.Millisecond
	if c.Preset == PresetFast {
		rc.HeartbeatTimeout = 250 * time.Millisecond
		rc.ElectionTimeout = 250 * time.Millisecond
		rc.LeaderLeaseTimeout = 100 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
	}
	if c.CommitTimeout > 0 {
		rc.CommitTimeout = c.CommitTimeout
	}
	if c.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.SnapshotInterval > 0 {
		rc.SnapshotInterval = c.SnapshotInterval
	}
	if c.TrailingLogs > 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
	return rc
}
