package hintpolicy

import (
	"hash/fnv"
	"slices"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// ownerView is an immutable snapshot of the members that may own probes:
// the alive members that do not declare themselves suspect (all alive
// members when every one of them is suspect), sorted by ID. Every node
// computes it from its own membership view, so nodes agree on a key's owner
// as soon as their views agree.
type ownerView struct {
	ids []string
}

// newOwnerView builds the candidate list from a membership snapshot. self is
// always a candidate while it is not suspect, even before memberlist has
// reported the local node.
func newOwnerView(members []cluster.Member, self string, selfSuspect bool) *ownerView {
	var healthy, alive []string
	seenSelf := false
	for _, m := range members {
		if m.State != cluster.StateAlive {
			continue
		}
		suspect := m.Meta.Suspect
		if m.ID == self {
			seenSelf, suspect = true, selfSuspect
		}
		alive = append(alive, m.ID)
		if !suspect {
			healthy = append(healthy, m.ID)
		}
	}
	if !seenSelf {
		alive = append(alive, self)
		if !selfSuspect {
			healthy = append(healthy, self)
		}
	}
	ids := healthy
	if len(ids) == 0 {
		ids = alive
	}
	slices.Sort(ids)
	return &ownerView{ids: ids}
}

// owner returns the probe owner of k: the candidate with the highest
// rendezvous score. "" when there is no candidate.
func (v *ownerView) owner(k breakerpool.Key) string {
	var best string
	var bestScore uint64
	for _, id := range v.ids {
		if s := rendezvousScore(k, id); best == "" || s > bestScore || (s == bestScore && id < best) {
			best, bestScore = id, s
		}
	}
	return best
}

// ownerAmong returns the probe owner of k among the candidates that are in
// among (the key's trippers, probeOwnerLocked): "" when none is.
func (v *ownerView) ownerAmong(k breakerpool.Key, among []string) string {
	var best string
	var bestScore uint64
	for _, id := range among {
		if _, ok := slices.BinarySearch(v.ids, id); !ok {
			continue
		}
		if s := rendezvousScore(k, id); best == "" || s > bestScore || (s == bestScore && id < best) {
			best, bestScore = id, s
		}
	}
	return best
}

// equal reports whether two views have the same candidates.
func (v *ownerView) equal(o *ownerView) bool {
	return o != nil && slices.Equal(v.ids, o.ids)
}

// rendezvousScore is the highest-random-weight score of (key, node): FNV-1a
// over the length-prefixed fields, then a splitmix64 finalizer so that
// similar inputs spread over the whole range. It is deterministic across
// nodes and processes (no per-process seed).
func rendezvousScore(k breakerpool.Key, node string) uint64 {
	h := fnv.New64a()
	for _, s := range [...]string{k.TaskGroup, k.NamespaceID, k.Destination, node} {
		var n [4]byte
		l := len(s)
		n[0], n[1], n[2], n[3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(s))
	}
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
