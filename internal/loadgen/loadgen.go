// Package loadgen holds what the paced benchmarks share: sending work at a
// fixed rate and summarising latencies. It imports no fusebox package, so
// every package's tests can use it (raftstore's cannot import deliverybench,
// which imports the API).
package loadgen

import (
	"slices"
	"time"
)

// Pace calls send(i) for i in [0, n), the i-th at start + i/rate (at once
// when behind), and returns start.
func Pace(n, rate int, send func(i int)) time.Time {
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d) // pacing the load, not waiting for a condition
		}
		send(i)
	}
	return start
}

// QuantileMs is the q-quantile of d in milliseconds (0 for none).
func QuantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}
