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
