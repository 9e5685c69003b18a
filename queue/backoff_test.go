package queue

import (
	"math"
	"testing"
	"time"
)

func TestDownBackoffTable(t *testing.T) {
	for _, c := range []struct {
		attempts int
		u        float64
		want     time.Duration
	}{
		{1, 0, 800 * time.Millisecond},
		{1, 0.5, 900 * time.Millisecond},
		{1, 0.999999, time.Second - 200*time.Nanosecond},
		{2, 0, 1600 * time.Millisecond},
		{3, 1 - 1e-12, 4 * time.Second},
		{0, 0, 800 * time.Millisecond}, // clamped to the first attempt
		{12, 0, time.Duration(0.8 * float64(2048*time.Second))},
		{13, 0, time.Duration(0.8 * float64(time.Hour))}, // 4096 s > 1 h: capped
		{100, 0.5, time.Duration(0.9 * float64(time.Hour))},
		{math.MaxInt32, 0, time.Duration(0.8 * float64(time.Hour))},
		{1, -3, 800 * time.Millisecond},         // u clamped
		{1, math.NaN(), 800 * time.Millisecond}, // u clamped
	} {
		got := DownBackoff(c.attempts, c.u)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("DownBackoff(%d, %v) = %v, want %v", c.attempts, c.u, got, c.want)
		}
	}
	if got := DownBackoff(1, 5); got >= time.Second {
		t.Errorf("DownBackoff(1, 5) = %v, want < 1s (jitter stays below 1)", got)
	}
}

func TestBlockedBackoffTable(t *testing.T) {
	for _, c := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{0, 0.5, 0},
		{1, 0.5, 0}, // the one immediate resubmit
		{2, 0, 2400 * time.Millisecond},
		{2, 0.5, 2700 * time.Millisecond},
		{3, 0, time.Duration(0.8 * 4.5 * float64(time.Second))},
		{4, 0, time.Duration(0.8 * 6.75 * float64(time.Second))},
		{11, 0, time.Duration(0.8 * 3 * math.Pow(1.5, 9) * float64(time.Second))},  // 115 s
		{13, 0, time.Duration(0.8 * 3 * math.Pow(1.5, 11) * float64(time.Second))}, // 259 s, just under the cap
		{14, 0, time.Duration(0.8 * float64(5*time.Minute))},                       // 389 s: capped
		{50, 0.5, time.Duration(0.9 * float64(5*time.Minute))},
	} {
		got := BlockedBackoff(c.n, c.u)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("BlockedBackoff(%d, %v) = %v, want %v", c.n, c.u, got, c.want)
		}
	}
}

func TestBackoffMonotoneAndBounded(t *testing.T) {
	prevDown, prevBlocked := time.Duration(0), time.Duration(0)
	for n := 1; n < 200; n++ {
		d, b := DownBackoff(n, 0), BlockedBackoff(n, 0)
		if d < prevDown || b < prevBlocked {
			t.Fatalf("n=%d: backoff decreased (%v < %v or %v < %v)", n, d, prevDown, b, prevBlocked)
		}
		if DownBackoff(n, 0.999999) >= DownBackoffMax || BlockedBackoff(n, 0.999999) >= BlockedBackoffMax {
			t.Fatalf("n=%d: backoff reached its cap despite jitter < 1", n)
		}
		prevDown, prevBlocked = d, b
	}
}

func TestRetryBackoffPolicy(t *testing.T) {
	for _, c := range []struct {
		init, max time.Duration
		attempts  int
		u         float64
		want      time.Duration
	}{
		{2 * time.Second, time.Minute, 1, 0, 1600 * time.Millisecond},
		{2 * time.Second, time.Minute, 3, 0, 6400 * time.Millisecond},
		{2 * time.Second, time.Minute, 10, 0, 48 * time.Second}, // capped: 60 s × 0.8
		{50 * time.Millisecond, 100 * time.Millisecond, 5, 0, 80 * time.Millisecond},
		{0, 0, 2, 0, 1600 * time.Millisecond},                  // non-positive bounds: Temporal's 1 s, 1 h
		{time.Hour, time.Second, 1, 0, 800 * time.Millisecond}, // initial above the cap: the cap
	} {
		if got := RetryBackoff(c.init, c.max, c.attempts, c.u); got != c.want {
			t.Errorf("RetryBackoff(%v, %v, %d, %v) = %v, want %v", c.init, c.max, c.attempts, c.u, got, c.want)
		}
	}
	for n := 1; n < 80; n++ {
		if RetryBackoff(time.Second, time.Hour, n, 0.3) != DownBackoff(n, 0.3) {
			t.Fatalf("DownBackoff(%d) is not the default retry policy", n)
		}
	}
}

// An unexpected error is retried as Temporal reschedules a task whose
// processing failed (common.CreateTaskReschedulePolicy): 1s × 1.1ⁿ capped
// at 3 min, jittered down by up to 20 %. Under the destination's retry
// policy (1s × 2ⁿ capped at 1 h) Temporal's 70 errors took about 59 hours
// to reach the DLQ; now about 75 minutes.
func TestRescheduleBackoffTable(t *testing.T) {
	for _, c := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0, 800 * time.Millisecond},
		{2, 0, time.Duration(0.8 * 1.1 * float64(time.Second))},
		{10, 0.5, time.Duration(0.9 * math.Pow(1.1, 9) * float64(time.Second))},
		{55, 0, time.Duration(0.8 * math.Pow(1.1, 54) * float64(time.Second))}, // 172 s, just under the cap
		{56, 0, time.Duration(0.8 * float64(3*time.Minute))},                   // 189 s: capped
		{0, 0, 800 * time.Millisecond},                                         // clamped to the first
	} {
		got := RescheduleBackoff(RescheduleBase, c.n, c.u)
		if d := got - c.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("RescheduleBackoff(%d, %v) = %v, want %v", c.n, c.u, got, c.want)
		}
	}
	var total time.Duration
	for n := 1; n < 70; n++ { // the 70th error dead-letters: 69 waits
		total += RescheduleBackoff(RescheduleBase, n, 1-1e-12)
	}
	if total < 60*time.Minute || total > 80*time.Minute {
		t.Fatalf("69 reschedules take %v at most; want about 75 minutes, Temporal's", total)
	}
}
