package api

import (
	"encoding/json"
	"time"
)

// Wire types of the API. They are the external contract: add fields, never
// rename or repurpose them. Internal packages have their own types; the
// handlers translate.

// Member is one entry of GET /v1/cluster/members.
type Member struct {
	ID         string `json:"id"`
	GossipAddr string `json:"gossip_addr"`
	HTTPAddr   string `json:"http_addr"`
	RaftAddr   string `json:"raft_addr"`
	Version    string `json:"version,omitempty"`
	// LogVersion is the raft log version the member's build reads and
	// proposes (the version gate); 0 for builds from before it was
	// advertised.
	LogVersion int `json:"log_version,omitempty"`
	// State is the gossip state: alive, suspect, dead or left.
	State string `json:"state"`
	// RaftRole is voter, nonvoter or none (not in the Raft configuration).
	RaftRole string `json:"raft_role"`
	Leader   bool   `json:"leader"`
	// Suspect is true while the node suspects its own egress (many of its
	// breakers opened at once) and stops sending open hints.
	Suspect bool `json:"suspect,omitempty"`
	// TaskStoreUnreachable is true while the node (on the postgres task
	// store) cannot reach the database: the raft leader places no shard
	// on it.
	TaskStoreUnreachable bool `json:"task_store_unreachable,omitempty"`
}

// RaftServer is one server of the Raft configuration.
type RaftServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	// HeartbeatsFailingSince, in the leader's answer only, is when the
	// leader's heartbeats to this server began to fail (a second failure
	// confirmed it): a server gossip calls alive whose Raft port the leader
	// does not reach. It is not promoted, and after the reap timeout owns
	// no shards.
	HeartbeatsFailingSince *time.Time `json:"heartbeats_failing_since,omitempty"`
}

// RaftInfo is GET /v1/cluster/raft.
type RaftInfo struct {
	NodeID       string       `json:"node_id"`
	State        string       `json:"state"`
	Leader       string       `json:"leader"`
	LeaderAddr   string       `json:"leader_addr"`
	Term         uint64       `json:"term"`
	LastIndex    uint64       `json:"last_index"`
	AppliedIndex uint64       `json:"applied_index"`
	Servers      []RaftServer `json:"servers"`
	// LogVersion is the cluster's log version as this node sees it: the
	// lowest any server of the configuration advertises (0: unknown). A
	// command type newer than it is not proposed (upgrade_pending).
	LogVersion int `json:"log_version"`
	// LogVersionBehind lists the servers below this node's build, as
	// "id (log version N)" or "id (unknown)".
	LogVersionBehind []string `json:"log_version_behind,omitempty"`
	// LogStore is what this node's Raft log is stored on: "wal"
	// (raft-wal, the default) or "bolt" (raft-boltdb, before its data dir
	// was migrated). Absent from builds before it was reported.
	LogStore string `json:"log_store,omitempty"`
}

// ConfigEntry is one dynamic-config value with its constraint.
type ConfigEntry struct {
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value"`
	Index       uint64          `json:"index,omitempty"`
	UpdatedAt   time.Time       `json:"updated_at,omitzero"`
	Author      string          `json:"author,omitempty"`
}

// ConfigKey describes a registered dynamic-config key.
type ConfigKey struct {
	Key         string          `json:"key"`
	Type        string          `json:"type"`
	Default     json.RawMessage `json:"default"`
	Constraints []string        `json:"constraints"`
	Description string          `json:"description"`
}

// ConfigChange is one entry of the config history.
type ConfigChange struct {
	Index       uint64          `json:"index"`
	At          time.Time       `json:"at"`
	Author      string          `json:"author,omitempty"`
	Op          string          `json:"op"`
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
}

// ConfigList is GET /v1/config.
type ConfigList struct {
	Entries []ConfigEntry `json:"entries"`
	Keys    []ConfigKey   `json:"keys"`
}

// ConfigWrite is the body of PUT /v1/config/{key}.
type ConfigWrite struct {
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value"`
}

// Endpoint is a Nexus endpoint: a name that resolves to a target URL.
type Endpoint struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	// Health is the endpoint's active health check, if any.
	Health    *EndpointHealth `json:"health,omitempty"`
	Index     uint64          `json:"index,omitempty"`
	UpdatedAt time.Time       `json:"updated_at,omitzero"`
	Author    string          `json:"author,omitempty"`
}

// EndpointHealth is an endpoint's active health check: while the
// endpoint's breaker is open, the key's probe owner GETs URL every Interval
// (Go duration, default 10s), each call bounded by Timeout (default 2s, at
// most Interval); an answer with HealthyStatus (default 200) passes.
type EndpointHealth struct {
	URL           string `json:"url"`
	Interval      string `json:"interval,omitempty"`
	Timeout       string `json:"timeout,omitempty"`
	HealthyStatus int    `json:"healthy_status,omitempty"`
}

// WriteResult answers a replicated write: the Raft index it committed at.
type WriteResult struct {
	Index uint64 `json:"index"`
}

// BreakerCounts are gobreaker's counts in the current generation.
type BreakerCounts struct {
	Requests             uint32 `json:"requests"`
	TotalSuccesses       uint32 `json:"total_successes"`
	TotalFailures        uint32 `json:"total_failures"`
	ConsecutiveSuccesses uint32 `json:"consecutive_successes"`
	ConsecutiveFailures  uint32 `json:"consecutive_failures"`
}

// Breaker is one breaker as GET /v1/breakers shows it.
type Breaker struct {
	Node        string `json:"node,omitempty"`
	TaskGroup   string `json:"task_group"`
	Namespace   string `json:"namespace"`
	Destination string `json:"destination"`
	// State is closed, half-open or open; StateCode is 0, 1 or 2 (the
	// fusebox_breaker_state metric's value).
	State      string        `json:"state"`
	StateCode  int           `json:"state_code"`
	Counts     BreakerCounts `json:"counts"`
	Generation uint64        `json:"generation"`
	// Source is where the state came from: local, hint or operator.
	Source string `json:"source"`
	// Mode is auto, forced-open, forced-closed, guarded or disabled.
	Mode string `json:"mode"`
	// OpenRemainingSeconds is how long the breaker stays open before it
	// probes.
	OpenRemainingSeconds float64         `json:"open_remaining_seconds,omitempty"`
	Settings             json.RawMessage `json:"settings,omitempty"`
	HintPolicy           string          `json:"hint_policy,omitempty"`
	// Ramp is the key's recovery ramp on this node while one is under way
	// (issue 19 §2).
	Ramp *BreakerRamp `json:"ramp,omitempty"`
	// Fleet is the key's fleet rate budget and the shares of it, when the
	// key has one (fusebox.destination.fleetRPS).
	Fleet *BreakerFleet `json:"fleet,omitempty"`
	// RetryAfterUntil is the destination's Retry-After deadline (this
	// node's 429/503 answer or a peer's gossiped one) holding the breaker
	// open; absent otherwise, and once it has passed.
	RetryAfterUntil *time.Time `json:"retry_after_until,omitempty"`
	// Confirm is the confirm hint policy's latest round for the key on
	// this node, if any (breaker_confirm.go).
	Confirm *BreakerConfirm `json:"confirm,omitempty"`
	// Health is this node's last active health check of the key's
	// destination, if any (breaker_health.go).
	Health *BreakerHealth `json:"health,omitempty"`
}

// BreakerRamp is a recovery ramp under way: after its close the key's rate
// on this node rises in 1 s stages from StartRPS to TargetRPS, from Since
// to Until.
type BreakerRamp struct {
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	StartRPS float64   `json:"start_rps"`
	RPS      float64   `json:"rps"`
	// TargetRPS is 0 when the configured rate is unlimited.
	TargetRPS float64 `json:"target_rps"`
}

// BreakerFleet is a key's fleet rate budget as this node sees it: the
// budget, this node's share and rate, and every node's share (issue 19 §3).
type BreakerFleet struct {
	BudgetRPS float64 `json:"budget_rps"`
	// Share is this node's fraction of the budget, in [0, 1].
	Share float64 `json:"share"`
	// RPS is this node's rate from it (the per-host rate caps it).
	RPS   float64            `json:"rps"`
	Nodes []BreakerFleetNode `json:"nodes,omitempty"`
}

// BreakerFleetNode is one node's share of a budget: the nodes with a backlog
// for the key share it by backlog; a silent node (not heard for a moment,
// crashed or cut off) keeps an equal slot.
type BreakerFleetNode struct {
	Node    string  `json:"node"`
	Backlog int64   `json:"backlog"`
	Share   float64 `json:"share"`
	Silent  bool    `json:"silent,omitempty"`
}

// BreakerList is GET /v1/breakers. With ?scope=cluster, Breakers holds every
// reachable node's breakers (each with Node set) and Unreachable lists the
// nodes that did not answer or that gossip reports failed.
type BreakerList struct {
	Scope       string    `json:"scope"`
	Breakers    []Breaker `json:"breakers"`
	Unreachable []string  `json:"unreachable,omitempty"`
}

// BreakerForce is the body of POST /v1/breakers/force.
type BreakerForce struct {
	TaskGroup   string `json:"task_group"`
	Namespace   string `json:"namespace"`
	Destination string `json:"destination"`
	// Mode is open, closed or auto (auto clears an earlier force).
	Mode string `json:"mode"`
	// Duration bounds a forced open ("10m"); empty means until cleared.
	Duration string `json:"duration,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// ForcedBreaker is a cluster-wide forced state stored in Raft.
type ForcedBreaker struct {
	TaskGroup   string    `json:"task_group"`
	Namespace   string    `json:"namespace"`
	Destination string    `json:"destination"`
	Mode        string    `json:"mode"`
	Until       time.Time `json:"until,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	Index       uint64    `json:"index"`
	Author      string    `json:"author,omitempty"`
}
