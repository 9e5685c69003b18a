package queuetest

import (
	"fusebox/queue"
	"fusebox/shardmap"
)

// HolderOwnership adapts a shard-map holder to Ownership for node (tests:
// the node wires the committed map through package ownership).
func HolderOwnership(h *shardmap.Holder, node string) queue.Ownership {
	return holderOwnership{h, node}
}

type holderOwnership struct {
	h    *shardmap.Holder
	node string
}

func (o holderOwnership) Watch() (map[int]uint64, <-chan struct{}) {
	m, ch := o.h.Watch()
	owned := make(map[int]uint64)
	if m != nil {
		for _, s := range m.OwnedBy(o.node) {
			owned[s] = m.Shards[s].Epoch
		}
	}
	return owned, ch
}
