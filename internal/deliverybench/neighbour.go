package deliverybench

import (
	"os/exec"
	"testing"
)

// StartNeighbour starts one CPU-bound neighbour process (a shell busy
// loop, one core's worth of work, no I/O) for the rest of tb and kills it
// in tb's cleanup. Benchmarks run their load beside it to show how much a
// noisy co-tenant stretches latency (issue 17 §3: p99 with one CPU-bound
// neighbour ≤ 3× the quiet figure).
func StartNeighbour(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start the CPU-bound neighbour: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // reap it; the error is the kill's signal
	})
}
