package raftstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
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
	c := newTestCluster(b, nil)
	ids := []string{"n1", "n2", "n3"}
	for _, id := range ids {
		c.add(id, 3)
	}
	c.start(ids...)
	leader := c.leader(15 * time.Second)
	ctx := context.Background()
	if _, err := leader.SetShardCount(ctx, state.SetShardCountCommand{Count: 16}); err != nil {
		b.Fatal(err)
	}
	nodes := []*Store{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	testwait.For(b, 10*time.Second, "the shard count on every node", func() bool {
		return nodes[0].Reader().ShardCount() > 0 && nodes[1].Reader().ShardCount() > 0 && nodes[2].Reader().ShardCount() > 0
	})
	setSlots := func(n int) {
		for _, s := range nodes {
			s.submits.mu.Lock()
			s.submits.slots = n
			s.submits.mu.Unlock()
		}
	}
	accepted := make([]time.Duration, b.N)
	work, wg := startSubmitters(b, ctx, nodes, submitters, accepted)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if i%block == 0 {
			setSlots([]int{slotsA, slotsB}[i/block%2])
		}
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d) // pacing the load, not waiting for a condition
		}
		work <- i
	}
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
	p99 := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return float64(d[int(0.99*float64(len(d)-1))].Microseconds()) / 1000
	}
	pa, pb := p99(a), p99(bb)
	b.ReportMetric(pa, fmt.Sprintf("p99-ms-slots%d", slotsA))
	b.ReportMetric(pb, fmt.Sprintf("p99-ms-slots%d", slotsB))
	if pa > 0 {
		b.ReportMetric(pb/pa, fmt.Sprintf("slots%d/slots%d", slotsB, slotsA))
	}
}
