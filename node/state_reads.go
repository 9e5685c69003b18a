package node

import (
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// nodeState is what the node's own loops read of the replicated state: the
// local replica, stale-OK (raftstore/state.State, through
// raftstore.Store.Reader). Subscribe wakes, coalesced, after a change to
// table. The queue's reads are taskTable (taskstore.go), the API's and
// ownership's are declared in their packages.
type nodeState interface {
	Subscribe(table state.Table) (<-chan struct{}, func())
	Config() []state.ConfigEntry
	ForcedBreakers() []state.ForcedBreaker
	Endpoint(name string) (state.Endpoint, bool)
	ShardMap() *shardmap.Map
	TaskBacklog(shard int) int
	OldestPendingTask(shard int) (state.Task, bool)
	ClusterID() string
}
