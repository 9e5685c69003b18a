package shardmap

import (
	"context"
	"sync"
	"sync/atomic"
)

// Holder holds the newest committed Map for lock-free reads on the hot path.
// Readers call Load (one atomic load) and get an immutable snapshot that stays
// consistent for as long as they use it; the Raft apply path calls Store.
//
// Waiters learn about new versions without polling:
//
//	for {
//		m, changed := h.Watch() // snapshot and channel taken together
//		... act on m (nil until the first Store) ...
//		select {
//		case <-changed: // closed by the next successful Store
//		case <-ctx.Done():
//			return
//		}
//	}
//
// Taking the channel with the snapshot (Watch, or Changed before Load) never
// misses a version: a Store that lands after the snapshot closes that channel.
// Every Store closes the channel at most once and replaces it, so a wake-up is
// an edge, not a level: reload after it.
//
// The zero Holder is ready to use and holds no map. A Holder must not be
// copied after first use.
type Holder struct {
	cur atomic.Pointer[Map]

	mu      sync.Mutex    // serializes Store and guards changed
	changed chan struct{} // closed on the next successful Store; nil until asked for
}

// Load returns the current map, or nil if none was stored yet. It never
// blocks. The result must not be modified.
func (h *Holder) Load() *Map {
	return h.cur.Load()
}

// Lookup returns the assignment of the shard that owns (namespaceID,
// workflowID) in the current map. ok is false if no map was stored yet.
func (h *Holder) Lookup(namespaceID, workflowID string) (a Assignment, ok bool) {
	m := h.cur.Load()
	if m == nil {
		return Assignment{}, false
	}
	return m.Owner(ShardOf(namespaceID, workflowID, m.NumShards))
}

// Store makes m current if it is newer than the current map (higher Version,
// or no map yet) and reports whether it did; an older or equal version is
// ignored, so replays and out-of-order deliveries cannot move the view
// backwards. m is validated first and rejected with an error if malformed.
// The caller gives up m: it must not be modified afterwards.
func (h *Holder) Store(m *Map) (stored bool, err error) {
	if err := m.Validate(); err != nil {
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.cur.Load(); cur != nil && m.Version <= cur.Version {
		return false, nil
	}
	h.cur.Store(m)
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	return true, nil
}

// Changed returns a channel that is closed by the next successful Store. Take
// it before Load to be sure not to miss a version, or use Watch.
func (h *Holder) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changedLocked()
}

// Watch returns the current map (nil if none) together with the channel that
// the next successful Store closes.
func (h *Holder) Watch() (*Map, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur.Load(), h.changedLocked()
}

func (h *Holder) changedLocked() chan struct{} {
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}

// Wait blocks until the current map has Version >= minVersion (any map at all
// for minVersion 0) and returns it, or returns ctx's error.
func (h *Holder) Wait(ctx context.Context, minVersion uint64) (*Map, error) {
	for {
		m, changed := h.Watch()
		if m != nil && m.Version >= minVersion {
			return m, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
