package shardmap

import (
	"fmt"
	"testing"
)

const benchNS = "7c1b2f4e-2d8a-4b8e-9a55-0f3c2e8d1a77"

func benchHolder(b *testing.B) *Holder {
	b.Helper()
	h, err := NewHolder(mustRebalance(b, mustNew(b, 1024), nodeIDs("node-", 10), nil))
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func benchWorkflowIDs() []string {
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%08d", i)
	}
	return ids
}

// BenchmarkLookup is the hot path: hash the workflow to its shard and read its
// owner from the current snapshot.
func BenchmarkLookup(b *testing.B) {
	h, wfs := benchHolder(b), benchWorkflowIDs()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := h.Load()
		if _, ok := m.Owner(ShardOf(benchNS, wfs[i%len(wfs)], m.NumShards)); !ok {
			b.Fatal("no owner")
		}
		i++
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	h, wfs := benchHolder(b), benchWorkflowIDs()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := h.Lookup(benchNS, wfs[i%len(wfs)]); !ok {
				b.Error("no owner")
				return
			}
			i++
		}
	})
}

func BenchmarkRebalance(b *testing.B) {
	for _, c := range []struct{ shards, nodes int }{{1024, 10}, {256, 100}} {
		b.Run(fmt.Sprintf("%dshards_%dnodes", c.shards, c.nodes), func(b *testing.B) {
			members := nodeIDs("node-", c.nodes+1)
			base := mustRebalance(b, mustNew(b, c.shards), members[:c.nodes], nil)
			b.ReportAllocs()
			for b.Loop() {
				// A join: the common real change.
				if _, changed, err := Rebalance(base, members, nil); err != nil || !changed {
					b.Fatal(changed, err)
				}
			}
		})
	}
}
