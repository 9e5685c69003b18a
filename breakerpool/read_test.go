package breakerpool

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// inRead reports whether the read copy holds b for k.
func inRead(p *Pool, k Key, b *Breaker) bool { return (*p.read.Load())[k] == b }

func TestReadCopyServesAfterEnoughMisses(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: 1 << 40})
	b := p.Get(keyA)
	if inRead(p.Pool, keyA, b) {
		t.Fatal("a new breaker is in the read copy before any rebuild")
	}
	for i := 0; i < readMinMisses && !inRead(p.Pool, keyA, b); i++ {
		if got := p.Get(keyA); got != b {
			t.Fatalf("Get %d returned another breaker", i)
		}
	}
	if !inRead(p.Pool, keyA, b) {
		t.Fatalf("not in the read copy after %d misses", readMinMisses)
	}
	before := p.misses.Load()
	for range 100 {
		if p.Get(keyA) != b {
			t.Fatal("read copy returned another breaker")
		}
	}
	if p.misses.Load() != before {
		t.Fatalf("hits counted as misses: %d → %d", before, p.misses.Load())
	}
}

func TestReadCopyDropsEvicted(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: 1 << 40})
	old := p.Get(keyA)
	p.rebuildRead()
	if !inRead(p.Pool, keyA, old) {
		t.Fatal("rebuild left keyA out")
	}
	if n := sweepIdle(p); n != 1 {
		t.Fatalf("evicted %d, want 1", n)
	}
	if _, ok := (*p.read.Load())[keyA]; ok {
		t.Fatal("the sweep's rebuild kept the evicted breaker")
	}
	nb := p.Get(keyA)
	if nb == old || nb.flags.Load()&flagDead != 0 {
		t.Fatal("Get after eviction did not build a live breaker")
	}
}

// A dead breaker left in the copy (a rebuild that ranged before the sweep
// deleted it) must send Get to entries, never be returned.
func TestReadCopyDeadEntryFallsThrough(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: 1 << 40})
	old := p.Get(keyA)
	p.rebuildRead()
	stale := p.read.Load()
	if sweepIdle(p) != 1 {
		t.Fatal("not evicted")
	}
	p.read.Store(stale) // as if a racing rebuild stored its older range
	nb := p.Get(keyA)
	if nb == old {
		t.Fatal("Get returned the dead breaker from the read copy")
	}
	if got, ok := p.Lookup(keyA); !ok || got != nb {
		t.Fatal("the breaker Get returned is not the pool's entry")
	}
}

// Many goroutines creating and reading keys while rebuilds run: every Get
// of a key returns that key's one live breaker (run with -race).
func TestReadCopyConcurrent(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: 1 << 40})
	keys := make([]Key, 200)
	for i := range keys {
		keys[i] = Key{TaskGroup: TaskGroupCallback, NamespaceID: "ns", Destination: fmt.Sprintf("d%d", i)}
	}
	var wg sync.WaitGroup
	got := make([][]*Breaker, 4)
	for w := range got {
		got[w] = make([]*Breaker, len(keys))
		wg.Go(func() {
			for range 20 {
				for i, k := range keys {
					b := p.Get(k)
					if b.key != k {
						t.Errorf("Get(%v) returned the breaker of %v", k, b.key)
						return
					}
					if got[w][i] == nil {
						got[w][i] = b
					} else if got[w][i] != b {
						t.Errorf("Get(%v) returned two breakers", k)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range keys {
		for w := range got {
			if got[w][i] != got[0][i] {
				t.Fatalf("key %d: workers saw different breakers", i)
			}
		}
	}
	if len(*p.read.Load()) == 0 {
		t.Fatal("no rebuild happened")
	}
}

// A pool past readMaxKeys drops the copy (Get goes straight to entries,
// counting nothing) and gets it back when a sweep shrinks it.
func TestReadCopyOnlyForSmallPools(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{IdleTTL: testTTL, EvictInterval: 1 << 40})
	keys := make([]Key, readMaxKeys+1)
	for i := range keys {
		keys[i] = Key{TaskGroup: TaskGroupCallback, NamespaceID: "ns", Destination: fmt.Sprintf("d%d", i)}
		p.Get(keys[i])
	}
	for range 2 { // the keys the last rebuild missed count until the next
		for _, k := range keys {
			p.Get(k)
		}
	}
	if p.read.Load() != nil {
		t.Fatalf("%d breakers kept a read copy", p.Len())
	}
	if p.Get(keys[5]).key != keys[5] || p.misses.Load() != 0 {
		t.Fatalf("Get without a copy: misses %d", p.misses.Load())
	}
	// Keep one key in use across both sweeps; the rest are evicted.
	now := time.Now()
	p.EvictIdle(now)
	p.Get(keys[0])
	if n := p.EvictIdle(now.Add(testTTL + time.Second)); n != readMaxKeys {
		t.Fatalf("evicted %d, want %d", n, readMaxKeys)
	}
	m := p.read.Load()
	if m == nil || len(*m) != 1 || (*m)[keys[0]] == nil {
		t.Fatal("the shrunk pool has no read copy of its one breaker")
	}
}
