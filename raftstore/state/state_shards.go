package state

import (
	"slices"
	"strings"
	"time"

	"fusebox/shardmap"
)

// Shard ownership state, in TableMeta: the typed, validated shard map (row
// "shards") and the set of draining nodes (row "draining"). The Raft leader
// commits placement with CommitShardMap (compare-and-set on the version);
// operators' intents (pin, release, drain) are their own commands, applied
// deterministically here, and the leader re-places after them.

// Drain reasons, recorded with a draining node.
const (
	// DrainOperator: an operator drained the node; only an operator undrains.
	DrainOperator = "operator"
	// DrainShutdown: the node drained itself before a graceful shutdown; it
	// clears the flag when it starts again.
	DrainShutdown = "shutdown"
	// DrainMisconfigured: the node's --shards differs from the cluster's, so
	// it excludes itself from placement until restarted with the right flag.
	DrainMisconfigured = "misconfigured"
)

// DrainingNode is a node that placement must not give shards to.
type DrainingNode struct {
	Node   string    `json:"node"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	Index  uint64    `json:"index"`
}

// CommitShardMapCommand commits Map if the committed map is still at
// PrevVersion (0: no map yet). Map.Version must be higher than PrevVersion,
// Map.NumShards must equal the cluster's shard count, and no shard's epoch may
// go back or stay put across an owner change.
type CommitShardMapCommand struct {
	CommandMeta
	PrevVersion uint64        `json:"prev_version"`
	Map         *shardmap.Map `json:"map"`
}

// SetShardPinCommand records a pin of Shard to Node ("" removes the pin). It
// does not move the shard: the leader's next placement does.
type SetShardPinCommand struct {
	CommandMeta
	Shard int    `json:"shard"`
	Node  string `json:"node,omitempty"`
}

// ReleaseShardCommand makes Shard unowned with a new epoch (the admin
// "close"). With Epoch set, it applies only if the shard is at that epoch.
type ReleaseShardCommand struct {
	CommandMeta
	Shard int     `json:"shard"`
	Epoch *uint64 `json:"epoch,omitempty"`
}

// SetDrainingNodeCommand sets (Draining true, with a Reason) or clears a
// node's draining flag.
type SetDrainingNodeCommand struct {
	CommandMeta
	Node     string `json:"node"`
	Draining bool   `json:"draining"`
	Reason   string `json:"reason,omitempty"`
}

func (c SetDrainingNodeCommand) Validate() *Error {
	if err := CheckName("node", c.Node, true); err != nil {
		return err
	}
	if c.Draining {
		switch c.Reason {
		case DrainOperator, DrainShutdown, DrainMisconfigured:
		default:
			return invalidArg("reason", "want %q, %q or %q, got %q", DrainOperator, DrainShutdown, DrainMisconfigured, c.Reason)
		}
	}
	return nil
}

// ShardMap returns the committed shard map, nil before the first commit. The
// map is immutable: never modify it.
func (s *State) ShardMap() *shardmap.Map {
	m, _ := first[metaRow](s.read(), string(TableMeta), metaShards)
	return m.Shards
}

// DrainingNodes returns the draining nodes, sorted by node.
func (s *State) DrainingNodes() []DrainingNode {
	m, _ := first[metaRow](s.read(), string(TableMeta), metaDraining)
	return slices.Clone(m.Draining)
}

// CheckShardEpoch returns nil if node owns shard at epoch in the committed
// map, and a *shardmap.WrongOwnerError with the current owner and epoch
// otherwise (also before the first map). The task table's fenced writes call
// it; inside an apply function use writer.checkShardEpoch instead, which reads
// the same transaction.
func (s *State) CheckShardEpoch(shard int, node string, epoch uint64) error {
	return shardmap.CheckEpoch(s.ShardMap(), shard, node, epoch)
}

func (w *writer) shardMap() *shardmap.Map {
	if m := w.meta(metaShards); m != nil {
		return m.Shards
	}
	return nil
}

// checkShardEpoch is CheckShardEpoch inside an FSM write transaction.
func (w *writer) checkShardEpoch(shard int, node string, epoch uint64) error {
	return shardmap.CheckEpoch(w.shardMap(), shard, node, epoch)
}

func (w *writer) putShardMap(m *shardmap.Map) *Error {
	return w.insert(string(TableMeta), &metaRow{Name: metaShards, Shards: m, Index: w.index})
}

func applyCommitShardMap(w *writer, payload []byte) (any, *Error) {
	var c CommitShardMapCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	m := c.Map
	if m == nil {
		return nil, invalidArg("map", "required")
	}
	if err := m.Validate(); err != nil {
		return nil, invalidArg("map", "%v", err)
	}
	count := 0
	if r := w.meta(metaShardCount); r != nil {
		count = r.ShardCount
	}
	if count == 0 {
		return nil, conflict("map", "the shard count is not set yet")
	}
	if m.NumShards != count {
		return nil, invalidArg("map", "map has %d shards; the cluster has %d", m.NumShards, count)
	}
	cur := w.shardMap()
	curV := uint64(0)
	if cur != nil {
		curV = cur.Version
	}
	if c.PrevVersion != curV {
		return nil, conflict("prev_version", "the shard map is at version %d, not %d", curV, c.PrevVersion)
	}
	if m.Version <= curV {
		return nil, conflict("version", "shard map version %d is not newer than the current version %d", m.Version, curV)
	}
	for i, a := range m.Shards {
		for _, n := range []struct{ f, v string }{{"owner", a.Owner}, {"pinned", a.Pinned}} {
			if err := CheckName("map", n.v, false); err != nil {
				return nil, invalidArg("map", "shard %d %s: %s", i, n.f, err.Message)
			}
		}
		if cur == nil {
			continue
		}
		o := cur.Shards[i]
		if a.Epoch < o.Epoch {
			return nil, invalidArg("map", "shard %d: epoch goes back from %d to %d", i, o.Epoch, a.Epoch)
		}
		if a.Owner != o.Owner && a.Epoch == o.Epoch {
			return nil, invalidArg("map", "shard %d: owner changes from %q to %q without a new epoch", i, o.Owner, a.Owner)
		}
	}
	if err := w.putShardMap(m); err != nil {
		return nil, err
	}
	return m.Version, nil
}

// currentShard returns the committed map and checks that shard is in it.
func (w *writer) currentShard(shard int) (*shardmap.Map, *Error) {
	cur := w.shardMap()
	if cur == nil {
		return nil, conflict("shard", "no shard map has been committed yet")
	}
	if shard < 0 || shard >= cur.NumShards {
		return nil, notFound("shard %d: no such shard (NumShards is %d)", shard, cur.NumShards)
	}
	return cur, nil
}

func applySetShardPin(w *writer, payload []byte) (any, *Error) {
	var c SetShardPinCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	if err := CheckName("node", c.Node, false); err != nil {
		return nil, err
	}
	cur, err := w.currentShard(c.Shard)
	if err != nil {
		return nil, err
	}
	if cur.Shards[c.Shard].Pinned == c.Node {
		return cur.Version, nil
	}
	next := *cur
	next.Shards = slices.Clone(cur.Shards)
	next.Shards[c.Shard].Pinned = c.Node
	next.Version++
	if err := w.putShardMap(&next); err != nil {
		return nil, err
	}
	return next.Version, nil
}

func applyReleaseShard(w *writer, payload []byte) (any, *Error) {
	var c ReleaseShardCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	cur, err := w.currentShard(c.Shard)
	if err != nil {
		return nil, err
	}
	a := cur.Shards[c.Shard]
	if c.Epoch != nil && *c.Epoch != a.Epoch {
		return nil, conflict("epoch", "shard %d is at epoch %d (owner %q), not %d", c.Shard, a.Epoch, a.Owner, *c.Epoch)
	}
	next, changed, e := shardmap.Release(cur, c.Shard)
	if e != nil {
		return nil, invalidArg("shard", "%v", e)
	}
	if !changed {
		return cur.Version, nil
	}
	if err := w.putShardMap(next); err != nil {
		return nil, err
	}
	return next.Version, nil
}

func applySetDrainingNode(w *writer, payload []byte) (any, *Error) {
	var c SetDrainingNodeCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var list []DrainingNode
	if r := w.meta(metaDraining); r != nil {
		list = r.Draining
	}
	i, found := slices.BinarySearchFunc(list, c.Node, func(d DrainingNode, n string) int { return strings.Compare(d.Node, n) })
	switch {
	case c.Draining && found && list[i].Reason == c.Reason:
		return nil, nil
	case c.Draining && found:
		list = slices.Clone(list)
		list[i] = DrainingNode{Node: c.Node, Reason: c.Reason, Since: c.At, Index: w.index}
	case c.Draining:
		list = slices.Insert(slices.Clone(list), i, DrainingNode{Node: c.Node, Reason: c.Reason, Since: c.At, Index: w.index})
	case found:
		list = slices.Delete(slices.Clone(list), i, i+1)
	default:
		return nil, nil
	}
	return nil, w.insert(string(TableMeta), &metaRow{Name: metaDraining, Draining: list, Index: w.index})
}
