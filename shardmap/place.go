package shardmap

import "slices"

// candidate is a live member prepared for rendezvous placement.
type candidate struct {
	id string
	h  uint64
}

// candidates returns the usable members, sorted by id, without duplicates and
// without empty ids, each with its hash. Sorting makes the result, and every
// tie-break, independent of the order the caller listed members in.
func candidates(members []string) []candidate {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			ids = append(ids, m)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	cs := make([]candidate, len(ids))
	for i, id := range ids {
		cs[i] = candidate{id: id, h: nodeHash(id)}
	}
	return cs
}

// hrw returns the rendezvous winner for a shard among cs, or "" if cs is
// empty. Equal scores (a 2^-64 event) go to the smaller id because cs is
// sorted and only a strictly higher score replaces the current best.
func hrw(shard int, cs []candidate) string {
	sh := shardHash(shard)
	best, bestScore := "", uint64(0)
	for i, c := range cs {
		if s := score(sh, c.h); i == 0 || s > bestScore {
			best, bestScore = c.id, s
		}
	}
	return best
}

// contains reports whether id is among cs (which is sorted by id).
func contains(cs []candidate, id string) bool {
	_, ok := slices.BinarySearchFunc(cs, id, func(c candidate, id string) int {
		switch {
		case c.id < id:
			return -1
		case c.id > id:
			return 1
		}
		return 0
	})
	return ok
}
