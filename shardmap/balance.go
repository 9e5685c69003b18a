package shardmap

import (
	"cmp"
	"slices"
)

// place returns the owner of every shard of prev for the live members cs
// (sorted, as candidates returns them) and pins: a sticky, bounded-load
// placement. See Rebalance for the contract and DESIGN.md for the reasoning.
//
//  1. A shard pinned to a live member goes to it. Pinned shards are outside
//     the balance: an operator's move is honoured without moving another
//     shard to compensate.
//  2. The other F shards ("free") are balanced: every member gets base =
//     ⌊F/k⌋ or base+1 of them, and exactly F mod k members get base+1.
//  3. A member keeps the free shards it owned in prev up to its target. The
//     extra slots go first to members that already hold more than base
//     (most first), so a balanced map is a fixed point and a join or a leave
//     moves only what the new balance requires. A member over its target
//     sheds the shards it ranks worst on (rendezvous rank among the live
//     members, then score), so what it gives up is what other members prefer.
//  4. Orphans (free shards whose owner is gone, "", or that were shed) are
//     taken in shard order; each goes to its highest-scoring member that
//     still has room.
//
// Everything is a function of prev's owners, the member set and pins, and
// every tie is broken by a total order, so the result is the same on every
// node and for any member order.
func place(prev *Map, cs []candidate, pins map[int]string) []string {
	owners := make([]string, prev.NumShards)
	k := len(cs)
	if k == 0 {
		return owners
	}
	index := make(map[string]int, k)
	for i, c := range cs {
		index[c.id] = i
	}

	// Pins to live members, and each member's kept free shards.
	kept := make([][]int, k)
	var orphans []int
	free := 0
	for s, a := range prev.Shards {
		if p := pins[s]; p != "" {
			if _, live := index[p]; live {
				owners[s] = p
				continue
			}
		}
		free++
		if i, live := index[a.Owner]; live {
			kept[i] = append(kept[i], s)
		} else {
			orphans = append(orphans, s)
		}
	}

	base, extras := free/k, free%k
	target := make([]int, k)
	for i := range target {
		target[i] = base
	}
	// Extra slots: members already above base first, most shards first.
	over := make([]int, 0, k)
	for i := range cs {
		if len(kept[i]) > base {
			over = append(over, i)
		}
	}
	slices.SortFunc(over, func(x, y int) int {
		if c := cmp.Compare(len(kept[y]), len(kept[x])); c != 0 {
			return c
		}
		return cmp.Compare(x, y) // cs is sorted by id
	})
	for _, i := range over[:min(extras, len(over))] {
		target[i]++
	}
	extras -= min(extras, len(over))

	// Keep up to the target; shed the shards the member ranks worst on.
	load := make([]int, k)
	for i, c := range cs {
		mine := kept[i]
		if len(mine) > target[i] {
			mine = byPreference(mine, i, cs)
			orphans = append(orphans, mine[target[i]:]...)
			mine = mine[:target[i]]
		}
		for _, s := range mine {
			owners[s] = c.id
		}
		load[i] = len(mine)
	}

	// Orphans, in shard order, to the best-scoring member with room. A
	// member at base may take one more while extra slots remain.
	slices.Sort(orphans)
	for _, s := range orphans {
		sh := shardHash(s)
		best, bestScore := -1, uint64(0)
		for i, c := range cs {
			if load[i] >= target[i] && (load[i] > base || extras == 0) {
				continue
			}
			if sc := score(sh, c.h); best < 0 || sc > bestScore {
				best, bestScore = i, sc
			}
		}
		if load[best] >= target[best] {
			target[best]++
			extras--
		}
		load[best]++
		owners[s] = cs[best].id
	}
	return owners
}

// byPreference returns shards sorted from the one member i most prefers to
// keep to the one it least prefers: by i's rendezvous rank among cs for the
// shard (0 = i would win it), then by i's score, then by shard number.
func byPreference(shards []int, i int, cs []candidate) []int {
	type pref struct {
		shard, rank int
		score       uint64
	}
	ps := make([]pref, len(shards))
	for j, s := range shards {
		sh := shardHash(s)
		mine := score(sh, cs[i].h)
		rank := 0
		for o, c := range cs {
			if o != i && score(sh, c.h) > mine {
				rank++
			}
		}
		ps[j] = pref{shard: s, rank: rank, score: mine}
	}
	slices.SortFunc(ps, func(a, b pref) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.shard, b.shard)
	})
	out := make([]int, len(ps))
	for j, p := range ps {
		out[j] = p.shard
	}
	return out
}
