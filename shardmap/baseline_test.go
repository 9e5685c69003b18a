package shardmap

// The placement before issue 20: plain rendezvous hashing, kept here as
// the baseline the tests and BenchmarkPlacement compare against.

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

// hrwOwners is the old Rebalance's choice of owners for n shards: a pin to
// a live member wins, otherwise the rendezvous winner. It is stateless.
func hrwOwners(n int, members []string, pins map[int]string) []string {
	cs := candidates(members)
	live := make(map[string]bool, len(cs))
	for _, c := range cs {
		live[c.id] = true
	}
	out := make([]string, n)
	for s := range out {
		if p := pins[s]; p != "" && live[p] {
			out[s] = p
		} else {
			out[s] = hrw(s, cs)
		}
	}
	return out
}
