package loadgen

import (
	"testing"
	"time"
)

func TestPaceSendsInOrderAtTheRate(t *testing.T) {
	var got []int
	start := Pace(5, 100, func(i int) { got = append(got, i) })
	if len(got) != 5 || got[0] != 0 || got[4] != 4 {
		t.Fatalf("sent %v, want 0..4", got)
	}
	// The 5th send is due 40 ms after start: Pace cannot have returned sooner.
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("5 sends at 100/s took %v, want at least 40ms", el)
	}
}

func TestQuantileMs(t *testing.T) {
	d := []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
	if got := QuantileMs(d, 0.5); got != 3 {
		t.Fatalf("p50 = %v, want 3", got)
	}
	if got := QuantileMs(d, 0.99); got != 4 {
		t.Fatalf("p99 = %v, want 4", got)
	}
	if d[0] != 4*time.Millisecond {
		t.Fatal("QuantileMs sorted its argument")
	}
	if QuantileMs(nil, 0.99) != 0 {
		t.Fatal("empty: want 0")
	}
}
