package state

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"fusebox/shardmap"
)

// Table names a memdb table that can be subscribed to.
type Table string

// Subscribable tables. TableMeta covers the cluster id, shard count and shard map.
const (
	TableConfig         Table = "config"
	TableConfigHistory  Table = "config_history"
	TableEndpoints      Table = "endpoints"
	TableForcedBreakers Table = "forced_breakers"
	TableMeta           Table = "meta"
)

// Internal tables, never notified to subscribers; not in go-memdb but in
// sideTables (side_tables.go).
const (
	tableRequests = "requests"
	tableCounters = "counters"
)

// allTables in snapshot order.
var allTables = []string{
	string(TableConfig), string(TableConfigHistory), string(TableEndpoints),
	string(TableForcedBreakers), string(TableMeta), tableRequests, tableCounters,
	string(TableTasks),
}

// ConfigEntry is one dynamic-config value, scoped by optional namespace and
// destination (empty means "any").
type ConfigEntry struct {
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value"`
	Index       uint64          `json:"index"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Author      string          `json:"author,omitempty"`
}

// History ops.
const (
	OpSet    = "set"
	OpDelete = "delete"
)

// ForceBreakerHistoryKey is the config_history key of breaker force changes.
const ForceBreakerHistoryKey = "fusebox.breaker.force"

// HistoryEntry is one change in config_history. Index is the raft index of
// the command, unique and increasing.
type HistoryEntry struct {
	Index       uint64          `json:"index"`
	At          time.Time       `json:"at"`
	Author      string          `json:"author,omitempty"`
	Op          string          `json:"op"`
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
}

// Endpoint is a Nexus endpoint: name → target URL.
type Endpoint struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	// Health is the endpoint's active health check, if it has one
	// (endpoint_health.go). Added after log version 2 as an optional field
	// of put_endpoint: entries and snapshots without it read as before.
	Health    *EndpointHealth `json:"health,omitempty"`
	Index     uint64          `json:"index"`
	UpdatedAt time.Time       `json:"updated_at"`
	Author    string          `json:"author,omitempty"`
}

// ForcedBreaker forces one breaker key open or closed on every node.
type ForcedBreaker struct {
	TaskGroup   string    `json:"task_group"`
	NamespaceID string    `json:"namespace"`
	Destination string    `json:"destination"`
	Mode        string    `json:"mode"`
	Until       time.Time `json:"until,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	Index       uint64    `json:"index"`
	Author      string    `json:"author,omitempty"`
}

// meta row names.
const (
	metaClusterID  = "cluster_id"
	metaShardCount = "shard_count"
	metaShards     = "shards"   // the typed shard map (state_shards.go)
	metaDraining   = "draining" // the draining nodes
)

// metaRow is a cluster-wide singleton.
type metaRow struct {
	Name       string `json:"name"`
	ClusterID  string `json:"cluster_id,omitempty"`
	ShardCount int    `json:"shard_count,omitempty"`
	// Shards is the committed shard map (row "shards"); immutable once
	// stored. (The retired opaque map used the JSON name "shard_map"; an old
	// snapshot's row of that name decodes to nothing and is harmless.)
	Shards *shardmap.Map `json:"shards,omitempty"`
	// Draining lists the draining nodes, sorted by node (row "draining").
	Draining []DrainingNode `json:"draining,omitempty"`
	Index    uint64         `json:"index"`
}

// requestRow remembers the result of a request id for dedup.
type requestRow struct {
	ID     string      `json:"id"`
	Index  uint64      `json:"index"`
	Result ApplyResult `json:"result"`
}

// counterRow is an internal counter (e.g. the history length).
type counterRow struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

const counterHistory = "history_len"

// keyIndexer is a unique index over several string fields, joined with NUL.
// Unlike memdb.CompoundIndex it accepts empty components (config, now in the
// side tables, needed them: "" namespace means every namespace).
type keyIndexer struct {
	n      int
	fields func(obj any) []string
}

func (k *keyIndexer) FromObject(obj any) (bool, []byte, error) {
	f := k.fields(obj)
	if f == nil {
		return false, nil, fmt.Errorf("keyIndexer: unexpected type %T", obj)
	}
	return true, joinKey(f), nil
}

func (k *keyIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != k.n {
		return nil, fmt.Errorf("keyIndexer: want %d args, got %d", k.n, len(args))
	}
	f := make([]string, len(args))
	for i, a := range args {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("keyIndexer: arg %d is %T, not string", i, a)
		}
		f[i] = s
	}
	return joinKey(f), nil
}

func joinKey(f []string) []byte {
	return []byte(strings.Join(f, "\x00") + "\x00")
}

func schema() *memdb.DBSchema {
	id := func(idx memdb.Indexer) map[string]*memdb.IndexSchema {
		return map[string]*memdb.IndexSchema{"id": {Name: "id", Unique: true, Indexer: idx}}
	}
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		string(TableEndpoints): {Name: string(TableEndpoints), Indexes: id(&memdb.StringFieldIndex{Field: "Name"})},
		string(TableForcedBreakers): {Name: string(TableForcedBreakers), Indexes: id(&keyIndexer{n: 3, fields: func(o any) []string {
			if e, ok := o.(*ForcedBreaker); ok {
				return []string{e.TaskGroup, e.NamespaceID, e.Destination}
			}
			return nil
		}})},
		string(TableMeta): {Name: string(TableMeta), Indexes: id(&memdb.StringFieldIndex{Field: "Name"})},
	}}
}
