package shardmap

// The hash functions in this file decide where durable data lives: a task is
// stored under ShardOf(namespaceID, workflowID, N) and a shard is placed on the
// node with the highest rendezvous score. They are part of the on-disk
// contract. Changing any constant or step here re-homes every workflow of every
// existing cluster, so the golden values in hash_test.go must never be edited
// to make a change pass.

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// fnv1a adds the bytes of s to the running FNV-1a 64 state h. It ranges over
// the string's bytes (not runes), so any byte sequence, valid UTF-8 or not, is
// hashed as is, in O(len(s)) time and with no allocation.
func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// mix64 is the SplitMix64 finalizer (Steele, Lea, Flood 2014; the "mix13"
// variant of Stafford). FNV-1a alone has weak low bits for short inputs that
// differ only in their last byte; the finalizer spreads every input bit over
// every output bit so that "mod N" and score comparisons see a uniform value.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// KeyHash returns the stable 64-bit hash of a workflow's shard key: FNV-1a 64
// over the bytes of namespaceID + "_" + workflowID (Temporal's key layout),
// passed through the SplitMix64 finalizer. The concatenation is hashed in
// place; nothing is allocated. Two keys that concatenate to the same bytes
// ("a_b"+"c" and "a"+"b_c") hash alike, which only means they share a shard.
func KeyHash(namespaceID, workflowID string) uint64 {
	h := fnv1a(fnvOffset64, namespaceID)
	h = fnv1a(h, "_")
	h = fnv1a(h, workflowID)
	return mix64(h)
}

// ShardOf returns the shard, in [0, n), that owns a workflow:
// KeyHash(namespaceID, workflowID) mod n. n is the cluster's fixed shard count;
// ShardOf treats n < 1 as 1 (so it always returns a valid index and never
// panics), but callers should have rejected such a count when the cluster was
// created. Any input, however long or malformed, is accepted; the cost is one
// pass over its bytes and no allocation.
func ShardOf(namespaceID, workflowID string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(KeyHash(namespaceID, workflowID) % uint64(n))
}

// nodeHash is the per-node half of the rendezvous score, computed once per
// node per placement.
func nodeHash(node string) uint64 {
	return mix64(fnv1a(fnvOffset64, node))
}

// shardHash is the per-shard half of the rendezvous score.
func shardHash(shard int) uint64 {
	return mix64(uint64(shard) + 0x9e3779b97f4a7c15)
}

// score is the rendezvous (highest random weight) score of a node for a shard:
// the node with the highest score owns the shard. The two halves are combined
// by XOR and mixed again, so the ranking of nodes for one shard is independent
// of the ranking for any other shard.
func score(shardH, nodeH uint64) uint64 {
	return mix64(shardH ^ nodeH)
}
