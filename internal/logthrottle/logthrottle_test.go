package logthrottle

import (
	"fmt"
	"testing"
	"time"
)

func fakeClock(t *Throttle) *time.Time {
	now := time.Unix(1_000_000, 0)
	t.now = func() time.Time { return now }
	return &now
}

func TestBurstThenOnePerInterval(t *testing.T) {
	th := New(30*time.Second, 3)
	now := fakeClock(th)
	for i := range 3 {
		if ok, s := th.Allow("a"); !ok || s != 0 {
			t.Fatalf("line %d of the burst: ok=%v suppressed=%d, want passed with 0", i, ok, s)
		}
	}
	for i := range 10 { // an election a second for 10 s
		*now = now.Add(time.Second)
		if ok, _ := th.Allow("a"); ok {
			t.Fatalf("line %d after the burst passed within the interval", i)
		}
	}
	*now = now.Add(20 * time.Second) // 30 s after the burst: one token back
	ok, s := th.Allow("a")
	if !ok || s != 10 {
		t.Fatalf("line after the interval: ok=%v suppressed=%d, want passed with 10", ok, s)
	}
	if ok, _ := th.Allow("a"); ok {
		t.Fatal("a second line in the same interval passed")
	}
}

func TestKindsAreIndependent(t *testing.T) {
	th := New(time.Minute, 1)
	fakeClock(th)
	if ok, _ := th.Allow("vote n2"); !ok {
		t.Fatal("first n2 line dropped")
	}
	if ok, _ := th.Allow("vote n2"); ok {
		t.Fatal("second n2 line passed")
	}
	if ok, s := th.Allow("vote n3"); !ok || s != 0 {
		t.Fatalf("n3's first line: ok=%v suppressed=%d; another peer is another kind", ok, s)
	}
}

func TestKeysBounded(t *testing.T) {
	th := New(time.Second, 1)
	now := fakeClock(th)
	for i := range maxKeys {
		th.Allow(fmt.Sprint(i))
	}
	// Full of busy kinds: a new kind passes, untracked.
	for range 3 {
		if ok, _ := th.Allow("new"); !ok {
			t.Fatal("a new kind was dropped while the table was full")
		}
	}
	if len(th.kind) != maxKeys {
		t.Fatalf("table grew to %d, want %d", len(th.kind), maxKeys)
	}
	// Once the others are idle they are forgotten and the new kind is tracked.
	*now = now.Add(time.Minute)
	th.Allow("new")
	if ok, _ := th.Allow("new"); ok {
		t.Fatal("the new kind is not throttled once there was room")
	}
	if len(th.kind) != 1 {
		t.Fatalf("idle kinds kept: %d", len(th.kind))
	}
}
