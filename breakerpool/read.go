package breakerpool

// The read copy: while the pool holds at most readMaxKeys breakers, Get's
// hit path is a lookup in a plain Go map that is never written, behind an
// atomic pointer. entries (an xsync.Map) stays the pool's truth for every
// write, eviction and range; the copy is rebuilt from it.
//
// Why, and why only small pools (BenchmarkPoolVsRaw, docs/architecture.md
// "Issue 17 §3"): with the three-string key, xsync.Map's Load is ~44 ns
// against ~19 ns for a Go map, about the pool's whole overhead over raw
// gobreaker at one key. With thousands of keys the lookup is bound by
// cache misses instead, and there the Go map's 56-byte inline slots cost
// more lines per lookup than xsync's buckets of pointers: at 10,000 keys
// the copy made the pool 1.10 → 1.17× raw, at 1,000 it gained nothing, at
// 10–300 it gained 0.02–0.08.
//
// A key the copy lacks (new since the last rebuild) or holds dead (evicted,
// possibly re-created since) goes to entries, and the miss is counted. Once
// the misses reach a quarter of the copy's size (at least readMinMisses),
// the next miss rebuilds the copy, so a burst of new keys costs O(1)
// amortized copying per miss, as sync.Map's promotion of its dirty map
// does. A rebuild that finds more than readMaxKeys breakers stores nil:
// Get then goes straight to entries and counts nothing (no shared counter
// on the hot path), until an eviction sweep shrinks the pool. A sweep that
// removed breakers rebuilds at once, so the copy never keeps evicted
// breakers alive.
//
// Correctness does not depend on the copy being fresh: a breaker in it is
// either the live entry for its key or dead (a breaker leaves entries only
// after the sweep marks it dead, and is never revived once deleted), and a
// dead one sends Get to entries.

const (
	// readMinMisses is the fewest misses that trigger a rebuild.
	readMinMisses = 16
	// readMaxKeys is the largest pool that keeps a read copy.
	readMaxKeys = 256
)

// missed counts a Get that the read copy could not serve and rebuilds the
// copy once enough have been counted. A rebuild already running makes the
// others skip, never wait.
func (p *Pool) missed() {
	n := p.misses.Add(1)
	if m := p.read.Load(); n < readMinMisses || m == nil || n < int64(len(*m)/4) {
		return
	}
	if p.readMu.TryLock() {
		p.rebuildReadLocked()
		p.readMu.Unlock()
	}
}

// rebuildRead replaces the read copy with the live entries, waiting for a
// rebuild in progress (whose range may predate the caller's deletions).
func (p *Pool) rebuildRead() {
	p.readMu.Lock()
	defer p.readMu.Unlock()
	p.rebuildReadLocked()
}

func (p *Pool) rebuildReadLocked() {
	p.misses.Store(0)
	if p.Len() > readMaxKeys {
		p.read.Store(nil)
		return
	}
	m := make(map[Key]*Breaker, p.Len())
	p.entries.Range(func(k Key, b *Breaker) bool {
		if b.flags.Load()&flagDead == 0 {
			m[k] = b
		}
		return true
	})
	if len(m) > readMaxKeys { // grew during the range
		p.read.Store(nil)
		return
	}
	p.read.Store(&m)
}
