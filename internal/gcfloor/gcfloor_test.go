package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		floor, live uint64
		want        int
	}{
		{64 * mib, 8 * mib, 700},                // goal 8 × 8 = 64 MiB
		{64 * mib, 16 * mib, 300},               // 16 × 4
		{64 * mib, 32 * mib, 100},               // twice the live heap reaches the floor: Go's default
		{64 * mib, 500 * mib, 100},              // a large heap is left alone
		{64 * mib, 1 * mib, 1600},               // capped: the runtime's 4 MiB minimum × 16 is the floor
		{64 * mib, 0, 1600},                     // before the first cycle: as if 1 MiB were live
		{64 * mib, 100, 1600},                   // a nearly empty heap: the cap, no overflow
		{4 * mib, 1 * mib, 100},                 // a floor at the runtime's own minimum changes nothing
		{6 * mib, 2 * mib, 150},                 // capped at 6 MiB / 4 MiB
		{1 << 40, 1, 1 << 40 * 100 / (4 * mib)}, // a huge floor: the cap, still an int
	} {
		if got := percentFor(c.floor, c.live); got != c.want {
			t.Errorf("percentFor(floor %d MiB, live %d B) = %d, want %d", c.floor/mib, c.live, got, c.want)
		}
	}
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestTunerKeepsTheGoalAtTheFloor runs the tuner in this (small-heaped)
// test process: after collections its finalizer has re-tuned, GOGC is what
// it says, and the runtime's heap goal is at the floor, not at twice the
// few MiB live; Stop restores Go's default and tuning stops.
func TestTunerKeepsTheGoalAtTheFloor(t *testing.T) {
	const floor = 64 * mib
	before := heapGoal()
	tu := Start(floor)
	t.Cleanup(tu.Stop)
	deadline := time.Now().Add(10 * time.Second)
	for tu.Tunes() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the tuner ran %d times in 10 s of forced collections: its finalizer is not re-armed", tu.Tunes())
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // finalizers run on their own goroutine
	}
	p := tu.Percent()
	if cur := debug.SetGCPercent(p); cur != p {
		t.Fatalf("GOGC is %d, the tuner says %d", cur, p)
	}
	if p <= BasePercent {
		t.Fatalf("GOGC %d with a live heap of a few MiB and a 64 MiB floor, want above %d", p, BasePercent)
	}
	runtime.GC()
	if goal := heapGoal(); goal < floor*3/4 || goal > floor*5/4 {
		t.Fatalf("heap goal %d MiB with the floor at 64 MiB (before the tuner: %d MiB)", goal/mib, before/mib)
	}

	tu.Stop()
	tu.Stop() // twice is safe
	if cur := debug.SetGCPercent(BasePercent); cur != BasePercent {
		t.Fatalf("GOGC %d after Stop, want %d", cur, BasePercent)
	}
	n := tu.Tunes()
	// A probe finalized in a later cycle than the tuner's last sentinel:
	// once it has run, so has any finalizer the tuner had armed.
	ran := make(chan struct{})
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) { close(ran) })
	for done := false; !done; {
		runtime.GC()
		select {
		case <-ran:
			done = true
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatal("a finalizer did not run in 10 s of forced collections")
			}
		}
	}
	runtime.GC()
	if tu.Tunes() != n {
		t.Fatalf("the tuner ran %d more times after Stop", tu.Tunes()-n)
	}
}
