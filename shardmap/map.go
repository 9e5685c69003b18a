package shardmap

import (
	"errors"
	"fmt"
	"slices"
)

// MaxShards bounds the shard count a Map may declare. It keeps a corrupt or
// hostile map (decoded from the Raft log or an admin request) from making
// New, Rebalance or Validate allocate without limit.
const MaxShards = 1 << 20

// ErrNoSuchShard is wrapped by every error about a shard number outside
// [0, NumShards).
var ErrNoSuchShard = errors.New("no such shard")

// Assignment is one shard's entry in a Map.
type Assignment struct {
	// Shard is the shard number, equal to the entry's index in Map.Shards.
	Shard int `json:"shard"`
	// Owner is the node that may work on the shard, or "" if none may.
	Owner string `json:"owner"`
	// Epoch increases by one every time Owner changes, including to and from
	// "", and past the task store's fence where that is ahead (a cluster
	// rebuilt on an older cluster's database: ownership/fences.go). A node
	// fences its writes with the epoch it was granted.
	Epoch uint64 `json:"epoch"`
	// Pinned is the node an operator pinned the shard to, or "". A pin wins
	// over placement while the pinned node is live.
	Pinned string `json:"pinned,omitempty"`
}

// Map is a versioned shard → owner table. The Raft leader builds maps with New,
// Rebalance and Release and commits them; every node reads the committed one
// through a Holder.
//
// A Map is immutable once built: the functions of this package always return a
// new Map and never modify their argument, and nobody may modify a Map after
// handing it to a Holder or another goroutine.
type Map struct {
	// Version increases with every committed change; a Holder ignores maps
	// whose Version is not higher than the one it has.
	Version uint64 `json:"version"`
	// NumShards is the cluster's fixed shard count.
	NumShards int `json:"num_shards"`
	// Shards has exactly NumShards entries; Shards[i].Shard == i.
	Shards []Assignment `json:"shards"`
}

// New returns the map of a new cluster: version 0, numShards unowned shards
// at epoch 0. numShards must be in [1, MaxShards].
func New(numShards int) (*Map, error) {
	if numShards < 1 || numShards > MaxShards {
		return nil, fmt.Errorf("shardmap: NumShards %d out of range [1, %d]", numShards, MaxShards)
	}
	m := &Map{NumShards: numShards, Shards: make([]Assignment, numShards)}
	for i := range m.Shards {
		m.Shards[i].Shard = i
	}
	return m, nil
}

// Validate checks the structure of a map that came from outside (the Raft log,
// a snapshot, the network): NumShards in range, one entry per shard in order.
// It does not check that owners are live; that is not knowable from the map.
func (m *Map) Validate() error {
	if m == nil {
		return errors.New("shardmap: nil map")
	}
	if m.NumShards < 1 || m.NumShards > MaxShards {
		return fmt.Errorf("shardmap: NumShards %d out of range [1, %d]", m.NumShards, MaxShards)
	}
	if len(m.Shards) != m.NumShards {
		return fmt.Errorf("shardmap: Shards has %d entries, NumShards is %d", len(m.Shards), m.NumShards)
	}
	for i, a := range m.Shards {
		if a.Shard != i {
			return fmt.Errorf("shardmap: Shards[%d].Shard is %d, want %d", i, a.Shard, i)
		}
	}
	return nil
}

// Owner returns shard's assignment. ok is false if m is nil or shard is out of
// range. It is O(1) and allocation-free; it is the hot-path lookup.
func (m *Map) Owner(shard int) (a Assignment, ok bool) {
	if m == nil || shard < 0 || shard >= len(m.Shards) {
		return Assignment{}, false
	}
	return m.Shards[shard], true
}

// OwnedBy returns, in increasing order, the shards whose owner is node. It
// returns nil for node "" (unowned shards belong to nobody).
func (m *Map) OwnedBy(node string) []int {
	if m == nil || node == "" {
		return nil
	}
	var out []int
	for _, a := range m.Shards {
		if a.Owner == node {
			out = append(out, a.Shard)
		}
	}
	return out
}

// Pins returns the map's pins, shard → node, as Rebalance takes them. It
// returns an empty, non-nil map when nothing is pinned.
func (m *Map) Pins() map[int]string {
	pins := make(map[int]string)
	if m == nil {
		return pins
	}
	for _, a := range m.Shards {
		if a.Pinned != "" {
			pins[a.Shard] = a.Pinned
		}
	}
	return pins
}

// Equal reports whether m and o are the same map, Version included. Two nil
// maps are equal.
func (m *Map) Equal(o *Map) bool {
	if m == nil || o == nil {
		return m == o
	}
	return m.Version == o.Version && m.NumShards == o.NumShards && slices.Equal(m.Shards, o.Shards)
}

// clone returns a deep copy of m.
func (m *Map) clone() *Map {
	c := *m
	c.Shards = slices.Clone(m.Shards)
	return &c
}

// checkShard returns an error wrapping ErrNoSuchShard if shard is not in m.
func (m *Map) checkShard(shard int) error {
	if shard < 0 || shard >= m.NumShards {
		return fmt.Errorf("shardmap: shard %d: %w (NumShards is %d)", shard, ErrNoSuchShard, m.NumShards)
	}
	return nil
}
