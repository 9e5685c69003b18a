package shardmap

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

const benchNS = "7c1b2f4e-2d8a-4b8e-9a55-0f3c2e8d1a77"

func benchHolder(b *testing.B) *Holder {
	b.Helper()
	h := &Holder{}
	if _, err := h.Store(mustRebalance(b, mustNew(b, 1024), nodeIDs("node-", 10), nil)); err != nil {
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

// placer computes owners of n shards for members, given the previous map.
type placer struct {
	name  string
	place func(tb testing.TB, prev *Map, members []string) *Map
}

var placers = []placer{
	{"bounded", func(tb testing.TB, prev *Map, members []string) *Map {
		return mustRebalance(tb, prev, members, nil)
	}},
	{"hrw", func(_ testing.TB, prev *Map, members []string) *Map { // the baseline: stateless
		m := prev.clone()
		for i, o := range hrwOwners(prev.NumShards, members, nil) {
			m.Shards[i].Owner = o
		}
		return m
	}},
}

// placementFigures are a placement's balance and movement over several id
// sets: max/mean load of an N-node cluster, shards moved by a join (N → N+1)
// over the ideal S/(N+1), and shards moved by each member's leave over that
// member's share; means and worst cases.
type placementFigures struct {
	maxMean, maxMeanWorst, join, joinWorst, leave, leaveWorst float64
}

func measurePlacement(tb testing.TB, p placer, shards, nodes int) placementFigures {
	var f placementFigures
	var moved, share int
	sets := benchIDSets(nodes + 1)
	for _, ids := range sets {
		m := p.place(tb, mustNew(tb, shards), ids[:nodes])
		l := loads(ownersOf(m))
		mx := 0
		for _, c := range l {
			mx = max(mx, c)
		}
		mm := float64(mx) * float64(nodes) / float64(shards)
		f.maxMean += mm / float64(len(sets))
		f.maxMeanWorst = max(f.maxMeanWorst, mm)

		j := float64(diff(m, p.place(tb, m, ids))) / (float64(shards) / float64(nodes+1))
		f.join += j / float64(len(sets))
		f.joinWorst = max(f.joinWorst, j)

		for _, id := range ids[:nodes] {
			mv := diff(m, p.place(tb, m, Drain(ids[:nodes], id)))
			moved += mv
			share += l[id]
			if l[id] > 0 {
				f.leaveWorst = max(f.leaveWorst, float64(mv)/float64(l[id]))
			}
		}
	}
	f.leave = float64(moved) / float64(share)
	return f
}

// diff counts the shards whose owner differs between a and b.
func diff(a, b *Map) int {
	n := 0
	for i := range a.Shards {
		if a.Shards[i].Owner != b.Shards[i].Owner {
			n++
		}
	}
	return n
}

// benchIDSets returns 8 sets of n node ids: realistic naming schemes and
// random ones from fixed seeds.
func benchIDSets(n int) [][]string {
	sets := [][]string{
		nodeIDs("node-", n), nodeIDs("fusebox-", n), nodeIDs("10.0.0.", n), nodeIDs("n", n),
	}
	r := rand.New(rand.NewPCG(7, uint64(n)))
	for range 4 {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%08x-%04x", r.Uint32(), r.Uint32()&0xffff)
		}
		sets = append(sets, ids)
	}
	return sets
}

// BenchmarkPlacement reports, for S shards on N nodes, the balance
// (max/mean) and the movement of a join and of a leave relative to the
// ideal, for the bounded-load placement and the old rendezvous placement
// (hrw, the baseline) in the same run; mean over 8 id sets, and the worst
// set or leaver. The timed operation is one join.
func BenchmarkPlacement(b *testing.B) {
	for _, s := range []int{16, 64, 256, 1024} {
		for _, n := range []int{3, 5, 9, 17} {
			for _, p := range placers {
				b.Run(fmt.Sprintf("S=%d/N=%d/%s", s, n, p.name), func(b *testing.B) {
					f := measurePlacement(b, p, s, n)
					ids := nodeIDs("node-", n+1)
					base := p.place(b, mustNew(b, s), ids[:n])
					for b.Loop() {
						p.place(b, base, ids)
					}
					b.ReportMetric(f.maxMean, "max/mean")
					b.ReportMetric(f.maxMeanWorst, "max/mean-worst")
					b.ReportMetric(f.join, "join/ideal")
					b.ReportMetric(f.joinWorst, "join/ideal-worst")
					b.ReportMetric(f.leave, "leave/ideal")
					b.ReportMetric(f.leaveWorst, "leave/ideal-worst")
				})
			}
		}
	}
}
