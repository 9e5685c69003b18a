package dynconfig

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
)

const wait = 10 * time.Second

// onlySubscriber returns the collection's single subscriber (white box).
func onlySubscriber(t *testing.T, c *Collection) *subscriber {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.subs) != 1 {
		t.Fatalf("%d subscribers, want 1", len(c.subs))
	}
	for s := range c.subs {
		return s
	}
	return nil
}

func TestCollectionStartsAtDefaults(t *testing.T) {
	c := NewCollection(nil)
	defer c.Close()
	if c.Current() == nil || len(c.Current().Entries()) != 0 {
		t.Fatal("new collection is not empty")
	}
	if got := c.Settings("ns", "d"); got != breakerpool.DefaultSettings() {
		t.Fatalf("Settings = %+v", got)
	}
}

func TestCollectionUpdateAndSettingsSource(t *testing.T) {
	c := NewCollection(nil)
	defer c.Close()
	var src breakerpool.SettingsSource = c
	c.Update([]Entry{
		ent(KeyBreakerSettings, "ns", "d", `{"Timeout":"3s"}`),
		ent(KeyBreakerHintPolicy, "", "", `"off"`),
	})
	got := src.Settings("ns", "d")
	if got.Timeout.D() != 3*time.Second || got.HintPolicy != breakerpool.HintOff {
		t.Fatalf("Settings = %+v", got)
	}
	// Update replaces the whole table: a value absent from it is gone.
	c.Update([]Entry{ent(KeyBreakerHintPolicy, "", "", `"off"`)})
	if got := src.Settings("ns", "d"); got.Timeout.D() != time.Minute {
		t.Fatalf("removed value still applies: %+v", got)
	}
	// Invalid entries are skipped; the rest applies.
	c.Update([]Entry{ent(KeyGroupLimiterBufferSize, "", "", `0`), ent(KeyGroupLimiterConcurrency, "", "", `9`)})
	if c.Current().Concurrency("", "") != 9 || c.Current().BufferSize("", "") != 100 {
		t.Fatal("partial update not applied")
	}
}

// The subscriber is called once per real change and not for updates that
// leave the values as they are (same table, other order, other spelling).
func TestCollectionNotifiesOnlyOnChange(t *testing.T) {
	c := NewCollection(nil)
	defer c.Close()
	var calls atomic.Int32
	var seen sync.Map // snapshot pointers a call observed
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	cancel := c.Subscribe(func() {
		seen.Store(c.Current(), true)
		calls.Add(1)
		entered <- struct{}{}
		<-gate
	})
	defer cancel()
	sub := onlySubscriber(t, c)

	a := []Entry{ent(KeyGroupLimiterBufferSize, "ns", "", `5`), ent(KeyBreakerSettings, "", "", `{"Timeout":"2s"}`)}
	aSame := []Entry{ent(KeyBreakerSettings, "", "", ` {"Timeout":"2s", "MaxRequests": 1} `), ent(KeyGroupLimiterBufferSize, "ns", "", `5`)}
	b := []Entry{ent(KeyGroupLimiterBufferSize, "ns", "", `6`)}

	c.Update(nil) // empty → empty: nothing changed
	if len(sub.kick) != 0 {
		t.Fatal("empty update signalled")
	}
	c.Update(a)
	<-entered // call 1 is running and holds the gate
	snapA := c.Current()
	for _, same := range [][]Entry{a, aSame} {
		c.Update(same)
		if len(sub.kick) != 0 {
			t.Fatalf("identical update %v signalled", same)
		}
		if c.Current() != snapA {
			t.Fatal("identical update replaced the snapshot")
		}
	}
	c.Update(b)
	if len(sub.kick) != 1 {
		t.Fatal("real change did not signal")
	}
	c.Update(a) // coalesces with the pending signal
	gate <- struct{}{}
	<-entered // call 2, for b and a together
	gate <- struct{}{}
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d calls, want 2", got)
	}
	if len(sub.kick) != 0 {
		t.Fatal("a signal is still pending")
	}
	if _, ok := seen.Load(snapA); !ok {
		t.Fatal("first call did not see the first snapshot")
	}
	if _, ok := seen.Load(c.Current()); !ok {
		t.Fatal("last call did not see the final snapshot")
	}
}

// A subscriber that blocks does not hold up Update, and calls to one
// subscriber never overlap.
func TestCollectionSlowSubscriber(t *testing.T) {
	c := NewCollection(nil)
	defer c.Close()
	release := make(chan struct{})
	var inFlight, maxInFlight, calls atomic.Int32
	var lastSeen atomic.Int64
	c.Subscribe(func() {
		n := inFlight.Add(1)
		if n > maxInFlight.Load() {
			maxInFlight.Store(n)
		}
		<-release
		lastSeen.Store(int64(c.Current().BufferSize("", "")))
		calls.Add(1)
		inFlight.Add(-1)
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 200; i++ {
			c.Update([]Entry{ent(KeyGroupLimiterBufferSize, "", "", fmt.Sprint(i))})
		}
	}()
	testwait.For(t, wait, "200 updates to return while the subscriber blocks", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	close(release)
	testwait.For(t, wait, "the subscriber to see the last update", func() bool { return lastSeen.Load() == 200 })
	if maxInFlight.Load() != 1 {
		t.Fatalf("%d concurrent calls to one subscriber", maxInFlight.Load())
	}
	if n := calls.Load(); n < 1 || n > 3 {
		t.Fatalf("%d calls for 200 updates behind a blocked subscriber; want them coalesced", n)
	}
}

func TestCollectionCancel(t *testing.T) {
	c := NewCollection(nil)
	var calls, other atomic.Int32
	cancel := c.Subscribe(func() { calls.Add(1) })
	c.Subscribe(func() { other.Add(1) })
	c.Update([]Entry{ent(KeyGroupLimiterBufferSize, "", "", `2`)})
	// Both calls for the first update before the second: a subscriber's
	// wake-ups coalesce, so a second update signalled before the other
	// subscriber ran would be one call, not two.
	testwait.For(t, wait, "first notification", func() bool { return calls.Load() == 1 && other.Load() == 1 })
	cancel()
	cancel() // idempotent
	c.Update([]Entry{ent(KeyGroupLimiterBufferSize, "", "", `3`)})
	testwait.For(t, wait, "the other subscriber", func() bool { return other.Load() == 2 })
	c.Close() // waits for every subscriber goroutine, including the cancelled one
	if got := calls.Load(); got != 1 {
		t.Fatalf("cancelled subscriber called %d times, want 1", got)
	}
}

// A subscriber may cancel itself from inside its own call.
func TestCollectionCancelFromCallback(t *testing.T) {
	c := NewCollection(nil)
	defer c.Close()
	var calls atomic.Int32
	var cancel func()
	ready := make(chan struct{})
	cancel = c.Subscribe(func() {
		<-ready
		calls.Add(1)
		cancel()
	})
	close(ready)
	c.Update([]Entry{ent(KeyGroupLimiterBufferSize, "", "", `2`)})
	testwait.For(t, wait, "the self-cancelling call", func() bool { return calls.Load() == 1 })
	testwait.For(t, wait, "the subscriber to be removed", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.subs) == 0
	})
	c.Update([]Entry{ent(KeyGroupLimiterBufferSize, "", "", `3`)})
	c.Close()
	if calls.Load() != 1 {
		t.Fatalf("called %d times after cancelling itself", calls.Load())
	}
}

func TestCollectionClose(t *testing.T) {
	c := NewCollection(nil)
	var calls atomic.Int32
	c.Subscribe(func() { calls.Add(1) })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	cancel := c.Subscribe(func() { calls.Add(1) })
	cancel()
	c.Update([]Entry{ent(KeyGroupLimiterBufferSize, "", "", `2`)})
	if c.Current().BufferSize("", "") != 2 {
		t.Fatal("Update after Close did not apply")
	}
	if calls.Load() != 0 {
		t.Fatal("subscriber called after Close")
	}
}

// Run with -race: readers resolve while Update swaps snapshots and
// subscribers re-read.
func TestCollectionConcurrentUpdateAndRead(t *testing.T) {
	c := NewCollection(nil)
	defer c.Close()
	tables := [2][]Entry{
		{ent(KeyBreakerSettings, "ns", "", `{"Timeout":"1s"}`), ent(KeyGroupLimiterBufferSize, "", "d", `1`)},
		{ent(KeyBreakerSettings, "ns", "", `{"Timeout":"2s"}`), ent(KeyGroupLimiterBufferSize, "", "d", `2`)},
	}
	var subCalls atomic.Int32
	for range 3 {
		c.Subscribe(func() {
			_ = c.Settings("ns", "d")
			subCalls.Add(1)
		})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Value
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := c.Current()
				to, buf := s.BreakerSettings("ns", "d").Timeout.D(), s.BufferSize("x", "d")
				// One snapshot is one table: never a mix of the two.
				if !(to == time.Second && buf == 1 || to == 2*time.Second && buf == 2 || to == time.Minute && buf == 100) {
					bad.Store(fmt.Sprintf("torn read: timeout %v buffer %d", to, buf))
				}
			}
		})
	}
	for i := range 500 {
		c.Update(tables[i%2])
	}
	close(stop)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
	testwait.For(t, wait, "subscribers to run", func() bool { return subCalls.Load() >= 3 })
}
