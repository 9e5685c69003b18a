package node

import (
	"fmt"
	"testing"

	"fusebox/internal/deliverybench"
	"fusebox/transport/transporttest"
)

// BenchmarkDeliveryLatencyNeighbour is BenchmarkDeliveryLatency at 1,000
// tasks/s on a fresh cluster, alone (neighbour=off) and beside one
// CPU-bound process (neighbour=on, deliverybench.StartNeighbour), in the
// same run: the ratio of their p99s is how much one noisy co-tenant on
// this 2-core machine stretches enqueue → delivered.
func BenchmarkDeliveryLatencyNeighbour(b *testing.B) {
	dest := transporttest.NewDestination(b)
	run := 0
	for _, mode := range []string{"off", "on"} {
		clusters := &lazyCluster{parent: b}
		b.Run("neighbour="+mode, func(b *testing.B) {
			bc := clusters.get(b, DefaultShards)
			if mode == "on" {
				deliverybench.StartNeighbour(b)
			}
			run++
			deliverybench.Latency(b, bc.clients, dest, 1000, fmt.Sprintf("nb%s%d", mode, run), false,
				func(ids []string) { bc.waitSucceeded(b, ids) })
		})
		clusters.close()
	}
}
