package shardmap

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// versioned returns a valid map with the given version.
func versioned(t testing.TB, v uint64, members ...string) *Map {
	t.Helper()
	m := mustRebalance(t, mustNew(t, 16), members, nil).clone()
	m.Version = v
	return m
}

func TestHolderStoresOnlyNewer(t *testing.T) {
	var h Holder // the zero value is usable
	if h.Load() != nil {
		t.Fatal("empty holder has a map")
	}
	if _, ok := h.Lookup("ns", "wf"); ok {
		t.Fatal("Lookup on empty holder ok")
	}
	m5 := versioned(t, 5, "a")
	for _, c := range []struct {
		m    *Map
		want bool
		cur  *Map
	}{
		{m5, true, m5},
		{versioned(t, 3, "b"), false, m5},
		{versioned(t, 5, "b"), false, m5},
		{versioned(t, 6, "b"), true, nil},
	} {
		stored, err := h.Store(c.m)
		if err != nil || stored != c.want {
			t.Fatalf("Store(v%d) = %v, %v; want %v", c.m.Version, stored, err, c.want)
		}
		want := c.cur
		if want == nil {
			want = c.m
		}
		if h.Load() != want {
			t.Fatalf("after Store(v%d) Load has v%d", c.m.Version, h.Load().Version)
		}
	}
	if _, err := h.Store(&Map{Version: 99, NumShards: 2}); err == nil {
		t.Fatal("Store accepted a malformed map")
	}
	if _, err := h.Store(nil); err == nil {
		t.Fatal("Store accepted nil")
	}
	if h.Load().Version != 6 {
		t.Fatal("a rejected map replaced the current one")
	}
	a, ok := h.Lookup("ns", "wf")
	if !ok || a.Owner != "b" || a.Shard != ShardOf("ns", "wf", 16) {
		t.Fatalf("Lookup = %+v, %v", a, ok)
	}
	if _, err := (&Holder{}).Store(&Map{}); err == nil {
		t.Fatal("an empty Holder accepted a malformed map")
	}
}

func TestHolderChangedIsClosedByNextStore(t *testing.T) {
	h := &Holder{}
	if _, err := h.Store(versioned(t, 1, "a")); err != nil {
		t.Fatal(err)
	}
	m, ch := h.Watch()
	if m.Version != 1 {
		t.Fatalf("Watch map v%d", m.Version)
	}
	if ch2 := h.Changed(); ch2 != ch {
		t.Fatal("Changed returned another channel before any Store")
	}
	h.Store(versioned(t, 1, "b")) // not newer: must not wake anyone
	select {
	case <-ch:
		t.Fatal("channel closed by an ignored Store")
	default:
	}
	h.Store(versioned(t, 2, "b"))
	select {
	case <-ch:
	default:
		t.Fatal("channel not closed by a successful Store")
	}
	if _, next := h.Watch(); next == ch {
		t.Fatal("closed channel handed out again")
	}
}

func TestHolderWait(t *testing.T) {
	var h Holder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got := make(chan *Map, 1)
	go func() {
		m, err := h.Wait(ctx, 3)
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	for v := uint64(1); v <= 3; v++ {
		if _, err := h.Store(versioned(t, v, "a")); err != nil {
			t.Fatal(err)
		}
	}
	if m := <-got; m == nil || m.Version < 3 {
		t.Fatalf("Wait returned %+v", m)
	}
	// Already satisfied: returns at once.
	if m, err := h.Wait(ctx, 0); err != nil || m.Version != 3 {
		t.Fatalf("Wait(0) = %v, %v", m, err)
	}
	// Never satisfied: returns the context's error.
	short, cancelShort := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.Wait(short, 100)
		done <- err
	}()
	cancelShort()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v", err)
	}
}

// TestHolderConcurrent runs readers on the hot path against a writer storing
// versions out of order; run with -race. Readers must never see the version go
// backwards, and a watcher must end on the last version without polling.
func TestHolderConcurrent(t *testing.T) {
	var h Holder
	const last = 200
	maps := make([]*Map, last+1)
	for v := range maps {
		maps[v] = versioned(t, uint64(v), "a", "b", "c")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seen uint64
			for ctx.Err() == nil {
				m := h.Load()
				if m == nil {
					continue
				}
				if m.Version < seen {
					t.Errorf("version went back from %d to %d", seen, m.Version)
					return
				}
				seen = m.Version
				if _, ok := m.Owner(int(seen) % m.NumShards); !ok {
					t.Error("Owner failed on a stored map")
					return
				}
			}
		}()
	}
	watched := make(chan uint64, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			m, changed := h.Watch()
			if m != nil && m.Version == last {
				watched <- m.Version
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	for v := 0; v <= last; v++ {
		h.Store(maps[v])
		if v >= 2 {
			h.Store(maps[v-2]) // stale replays are ignored
		}
	}
	select {
	case v := <-watched:
		if v != last {
			t.Fatalf("watcher ended on v%d", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watcher never saw the last version")
	}
	if v := h.Load().Version; v != last {
		t.Fatalf("holder ended on v%d, want v%d", v, last)
	}
	cancel()
	wg.Wait()
}
