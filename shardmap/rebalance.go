package shardmap

import (
	"maps"
	"slices"
)

// Rebalance computes the map that should follow prev for the given live
// members and pins. It is a pure, deterministic function: the same prev,
// the same set of members (in any order, duplicates and "" ignored) and the
// same pins give the same result on every node.
//
// For every shard:
//   - if pins names a node for it and that node is among members, the node
//     owns the shard (a pin to a node that is not live falls back to
//     placement and takes effect again when the node returns);
//   - otherwise placement is sticky and balanced: the unpinned shards are
//     spread so that every member owns ⌊F/k⌋ or ⌈F/k⌉ of them (F unpinned
//     shards, k members), a shard stays with its previous owner while that
//     owner is live and within its share, and the rest go to the
//     rendezvous-best member with room (see place). So a member joining
//     takes only what the new balance requires and only from members above
//     it, and a member leaving gives up only the shards it owned;
//   - with no members at all, the owner is "";
//   - Epoch is incremented exactly when the owner changes (also to or from
//     ""), which fences the previous owner;
//   - Pinned records pins[shard].
//
// pins is the complete set of pins (shard → node; a "" node means no pin);
// pass prev.Pins() to keep the current ones. A pinned shard outside
// [0, NumShards) is an error wrapping ErrNoSuchShard.
//
// If the result would not differ from prev in any assignment, Rebalance returns
// prev itself and changed == false, so the caller can skip committing a no-op.
// Otherwise it returns a new map with Version prev.Version+1.
func Rebalance(prev *Map, members []string, pins map[int]string) (next *Map, changed bool, err error) {
	if err := prev.Validate(); err != nil {
		return nil, false, err
	}
	// Sorted so that the error for several bad shards is deterministic.
	for _, s := range slices.Sorted(maps.Keys(pins)) {
		if err := prev.checkShard(s); err != nil {
			return nil, false, err
		}
	}
	owners := place(prev, candidates(members), pins)
	next = prev.clone()
	for i := range next.Shards {
		a := &next.Shards[i]
		a.Pinned = pins[i]
		if owner := owners[i]; owner != a.Owner {
			a.Owner = owner
			a.Epoch++
		}
		if *a != prev.Shards[i] {
			changed = true
		}
	}
	if !changed {
		return prev, false, nil
	}
	next.Version = prev.Version + 1
	return next, true, nil
}

// Release is the admin "close": the owners of the given shards must let go.
// Each listed shard that has an owner loses it (Owner "" and Epoch+1, which
// fences the old owner); the next Rebalance places it again, with yet another
// epoch, even if it lands on the same node. The leader may commit the released
// map and rebalance later, or chain the two and commit only the result:
//
//	m, _, err := shardmap.Release(cur, shard)
//	...
//	m, _, err = shardmap.Rebalance(m, members, m.Pins())
//
// Pins are kept. Shards that are already unowned are left alone; if none of the
// listed shards had an owner, Release returns prev and changed == false. A
// shard outside [0, NumShards) is an error wrapping ErrNoSuchShard.
func Release(prev *Map, shards ...int) (next *Map, changed bool, err error) {
	if err := prev.Validate(); err != nil {
		return nil, false, err
	}
	for _, s := range shards {
		if err := prev.checkShard(s); err != nil {
			return nil, false, err
		}
	}
	next = prev.clone()
	for _, s := range shards {
		if a := &next.Shards[s]; a.Owner != "" {
			a.Owner = ""
			a.Epoch++
			changed = true
		}
	}
	if !changed {
		return prev, false, nil
	}
	next.Version = prev.Version + 1
	return next, true, nil
}

// Drain returns members without node, for placing shards while node is being
// drained: Rebalance(prev, Drain(members, node), pins) moves every shard off
// node, pinned ones included (a pin to a node outside members falls back to
// placement), and only those shards. Pins to node stay recorded and take
// effect again once node is back in members. members is not modified.
func Drain(members []string, node string) []string {
	out := make([]string, 0, len(members))
	for _, m := range members {
		if m != node {
			out = append(out, m)
		}
	}
	return out
}
