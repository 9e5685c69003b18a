package e2e

import (
	"fmt"
	"testing"

	"fusebox/internal/deliverybench"
	"fusebox/transport/transporttest"
)

// BenchmarkProcessDeliveryLatencyNeighbour is BenchmarkProcessDeliveryLatency
// (three processes, 1,000 tasks/s) on a fresh cluster, alone
// (neighbour=off) and beside one CPU-bound process (neighbour=on), in the
// same run.
func BenchmarkProcessDeliveryLatencyNeighbour(b *testing.B) {
	dest := transporttest.NewDestination(b)
	run := 0
	for _, mode := range []string{"off", "on"} {
		procs := &lazyProcs{parent: b}
		b.Run("neighbour="+mode, func(b *testing.B) {
			bp := procs.get(b)
			if mode == "on" {
				deliverybench.StartNeighbour(b)
			}
			run++
			before := dest.Count("")
			deliverybench.Latency(b, bp.clients, dest, 1000, fmt.Sprintf("pnb%s%d", mode, run), true,
				func(ids []string) { bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before }) })
		})
		if procs.bp != nil {
			procs.bp.c.StopAll(b)
		}
	}
}
