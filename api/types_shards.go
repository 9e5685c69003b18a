package api

import "time"

// Shard is one shard's entry in the committed shard map.
type Shard struct {
	Shard int `json:"shard"`
	// Owner is the node that works on the shard, "" while unowned.
	Owner string `json:"owner"`
	// Epoch increases whenever Owner changes (and, with the postgres task
	// store, past a fence the database holds from an older cluster); writes
	// carry it as a fence.
	Epoch uint64 `json:"epoch"`
	// Pinned is the node an operator moved the shard to ("" if none).
	Pinned string `json:"pinned,omitempty"`
	// OwnerDraining is true while the owner is draining: the shard is about
	// to move.
	OwnerDraining bool `json:"owner_draining,omitempty"`
}

// DrainingNode is a node that shard placement skips.
type DrainingNode struct {
	Node string `json:"node"`
	// Reason is operator, shutdown or misconfigured.
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// ShardList is GET /v1/shards: the committed shard map.
type ShardList struct {
	Version   uint64         `json:"version"`
	NumShards int            `json:"num_shards"`
	Shards    []Shard        `json:"shards"`
	Draining  []DrainingNode `json:"draining"`
}

// Task tracking states of ShardDetail.Tasks.
const (
	TasksTracked    = "tracked"
	TasksNotTracked = "not tracked yet"
)

// ShardDetail is GET /v1/shards/{id}.
type ShardDetail struct {
	Shard
	Version uint64 `json:"version"`
	// Tasks says whether Backlog and AckLevel are reported ("tracked") or
	// not ("not tracked yet": the node has no task table); they are omitted
	// rather than shown as zeros when not tracked.
	Tasks   string `json:"tasks"`
	Backlog *int   `json:"backlog,omitempty"`
	// AckLevel is the creation time (Unix ms) of the shard's oldest pending
	// task: every older task of the shard is done. 0 when nothing is pending.
	AckLevel *uint64 `json:"ack_level,omitempty"`
}

// NodeShards is GET /v1/nodes/{id}/shards and the answer of the drain calls.
type NodeShards struct {
	Node        string  `json:"node"`
	Version     uint64  `json:"version"`
	Draining    bool    `json:"draining"`
	DrainReason string  `json:"drain_reason,omitempty"`
	Shards      []Shard `json:"shards"`
}

// ShardMove is the body of POST /v1/shards/{id}/move.
type ShardMove struct {
	Node string `json:"node"`
}

// ShardClose is the body of POST /v1/shards/{id}/close; exactly one of
// Epoch and Force. With Epoch the close applies only if the shard is still
// at that epoch; otherwise it is refused with wrong_owner and the current
// owner and epoch. Force closes it whatever its epoch.
type ShardClose struct {
	Epoch *uint64 `json:"epoch,omitempty"`
	Force bool    `json:"force,omitempty"`
}
