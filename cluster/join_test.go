package cluster

import (
	"testing"
	"time"
)

// A member newly dead is tried again after min, then at doubling waits up
// to max, where they stay; a look that finds no new dead member changes
// nothing, and one that does (even a member that came back and died
// again) starts over from min.
func TestReconnectSchedule(t *testing.T) {
	const lo, hi = time.Second, 30 * time.Second
	r := newReconnectSchedule(lo, hi)
	if r.saw(nil) {
		t.Fatal("no dead member counted as a new one")
	}
	if got := r.next(); got != hi {
		t.Fatalf("with no member dead: next %v, want the reconnect interval %v", got, hi)
	}
	if !r.saw([]string{"a:1"}) {
		t.Fatal("a newly dead member not seen as new")
	}
	var got []time.Duration
	for range 7 {
		got = append(got, r.next())
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("waits %v, want %v seconds", got, want)
		}
	}
	if r.saw([]string{"a:1"}) {
		t.Fatal("the same dead member seen as new again")
	}
	if got := r.next(); got != hi {
		t.Fatalf("after a look with nothing new: next %v, want %v", got, hi)
	}
	if !r.saw([]string{"a:1", "b:1"}) || r.next() != lo {
		t.Fatal("a second member dying did not start the schedule over")
	}
	r.saw([]string{"b:1"}) // a came back
	r.next()
	if !r.saw([]string{"a:1", "b:1"}) || r.next() != lo {
		t.Fatal("a member that came back and died again did not start the schedule over")
	}
}
