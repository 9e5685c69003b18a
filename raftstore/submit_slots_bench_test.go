package raftstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fusebox/internal/loadgen"
)

// BenchmarkSubmitSlots compares two numbers of group-commit flush slots
// (submitBatchesInFlight) in one run: single submits paced at rate through
// three nodes, as BenchmarkPacedSubmits, in blocks of 250 that alternate
// between the two slot counts on every node, so that both see the same
// machine. It reports each one's accept p99 and their ratio (the
// machine's load moves the absolute figures far more than the ratio).
func BenchmarkSubmitSlots(b *testing.B) {
	for _, rate := range []int{1000, 2000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) { submitSlots(b, rate, 2, 4) })
	}
}

func submitSlots(b *testing.B, rate, slotsA, slotsB int) {
	const submitters, block = 256, 250
	nodes := startShardedN3(b, nil)
	setSlots := func(n int) {
		for _, s := range nodes {
			s.submits.mu.Lock()
			s.submits.slots = n
			s.submits.mu.Unlock()
		}
	}
	accepted := make([]time.Duration, b.N)
	work, wg := startSubmitters(b, context.Background(), nodes, submitters, accepted)
	b.ResetTimer()
	loadgen.Pace(b.N, rate, func(i int) {
		if i%block == 0 {
			setSlots([]int{slotsA, slotsB}[i/block%2])
		}
		work <- i
	})
	close(work)
	wg.Wait()
	b.StopTimer()
	setSlots(submitBatchesInFlight)
	var a, bb []time.Duration
	for i, d := range accepted {
		if i/block%2 == 0 {
			a = append(a, d)
		} else {
			bb = append(bb, d)
		}
	}
	pa, pb := loadgen.QuantileMs(a, 0.99), loadgen.QuantileMs(bb, 0.99)
	b.ReportMetric(pa, fmt.Sprintf("p99-ms-slots%d", slotsA))
	b.ReportMetric(pb, fmt.Sprintf("p99-ms-slots%d", slotsB))
	if pa > 0 {
		b.ReportMetric(pb/pa, fmt.Sprintf("slots%d/slots%d", slotsB, slotsA))
	}
}
