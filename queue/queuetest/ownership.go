package queuetest

import "sync"

// Ownership is a settable queue.Ownership, for tests where a node's view of
// the shard map must lag the committed one.
type Ownership struct {
	mu      sync.Mutex
	owned   map[int]uint64
	changed chan struct{}
}

// NewOwnership returns an Ownership that owns owned (shard → epoch).
func NewOwnership(owned map[int]uint64) *Ownership {
	return &Ownership{owned: clone(owned), changed: make(chan struct{})}
}

// Watch implements queue.Ownership.
func (o *Ownership) Watch() (map[int]uint64, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return clone(o.owned), o.changed
}

// Set replaces the owned shards and wakes the watcher.
func (o *Ownership) Set(owned map[int]uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owned = clone(owned)
	close(o.changed)
	o.changed = make(chan struct{})
}

func clone(m map[int]uint64) map[int]uint64 {
	c := make(map[int]uint64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
