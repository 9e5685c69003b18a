package queue

import (
	"math"
	"time"
)

// Retry policies (REFERENCE.md, "Temporal's outbound queue, as built").
const (
	// DownBackoffBase and DownBackoffMax shape the destination-down retry:
	// 1s × 2ⁿ capped at 1h.
	DownBackoffBase = time.Second
	DownBackoffMax  = time.Hour
	// BlockedBackoffBase, BlockedBackoffFactor and BlockedBackoffMax shape
	// the breaker-open reschedule: 3s × 1.5ⁿ capped at 5 min, after at most
	// one immediate resubmit.
	BlockedBackoffBase   = 3 * time.Second
	BlockedBackoffFactor = 1.5
	BlockedBackoffMax    = 5 * time.Minute
	// JitterMin is the low end of the jitter factor range [JitterMin, 1).
	JitterMin = 0.8
)

// jitter maps u ∈ [0, 1) to a factor in [JitterMin, 1). Values outside
// [0, 1) are clamped.
func jitter(u float64) float64 {
	if !(u >= 0) { // also NaN
		u = 0
	}
	// Capped a hair below 1 so that the product with a duration, rounded,
	// stays below it.
	return min(JitterMin+(1-JitterMin)*u, 1-1e-9)
}

// expBackoff returns base × factor^n capped at max, without overflow.
func expBackoff(base time.Duration, factor float64, n int, max time.Duration) time.Duration {
	if n < 0 {
		n = 0
	}
	d := float64(base) * math.Pow(factor, float64(n))
	if d >= float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
		return max
	}
	return time.Duration(d)
}

// DownBackoff is the delay before the next attempt of a task whose attempt
// number `attempts` (1 for the first) found its destination down:
// 1s × 2^(attempts-1), capped at 1h, times a jitter factor in [0.8, 1.0)
// drawn from u ∈ [0, 1).
func DownBackoff(attempts int, u float64) time.Duration {
	d := expBackoff(DownBackoffBase, 2, attempts-1, DownBackoffMax)
	return time.Duration(float64(d) * jitter(u))
}

// BlockedBackoff is the delay before a task that the breaker rejected for
// the n-th consecutive time (n ≥ 1) is tried again. The first rejection is
// resubmitted at once (0); later ones wait 3s × 1.5^(n-2), capped at 5 min,
// times a jitter factor in [0.8, 1.0) drawn from u ∈ [0, 1).
func BlockedBackoff(n int, u float64) time.Duration {
	if n <= 1 {
		return 0
	}
	d := expBackoff(BlockedBackoffBase, BlockedBackoffFactor, n-2, BlockedBackoffMax)
	return time.Duration(float64(d) * jitter(u))
}
