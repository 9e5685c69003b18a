package breakerpool

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

func benchKeys(n int) []Key {
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{TaskGroup: TaskGroupNexusInvocation, NamespaceID: fmt.Sprint("namespace-", i%97), Destination: fmt.Sprint("endpoint-", i)}
	}
	return keys
}

func benchPool(b *testing.B, cfg Config) *Pool {
	b.Helper()
	p, err := New(cfg, nil, prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	p.Start()
	b.Cleanup(p.Close)
	return p
}

// BenchmarkRawGobreaker is the baseline: gobreaker's two-step Allow+done,
// looked up in a plain map for the 10,000-key case.
func BenchmarkRawGobreaker(b *testing.B) {
	for _, n := range []int{1, 10000} {
		keys := benchKeys(n)
		m := make(map[Key]*gobreaker.TwoStepCircuitBreaker[struct{}], n)
		for _, k := range keys {
			m[k] = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: k.String()})
		}
		b.Run(fmt.Sprintf("keys=%d/serial", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				done, err := m[keys[i%n]].Allow()
				if err != nil {
					b.Fatal(err)
				}
				done(nil)
				i++
			}
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					done, err := m[keys[i%n]].Allow()
					if err != nil {
						panic(err)
					}
					done(nil)
					i++
				}
			})
		})
	}
}

// BenchmarkPoolAllow is the hot path: pool lookup + Allow + done.
func BenchmarkPoolAllow(b *testing.B) {
	for _, n := range []int{1, 10000} {
		keys := benchKeys(n)
		p := benchPool(b, Config{})
		for _, k := range keys {
			p.Get(k)
		}
		b.Run(fmt.Sprintf("keys=%d/serial", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				done, err := p.Get(keys[i%n]).Allow()
				if err != nil {
					b.Fatal(err)
				}
				done(true)
				i++
			}
		})
		b.Run(fmt.Sprintf("keys=%d/parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					done, err := p.Get(keys[i%n]).Allow()
					if err != nil {
						panic(err)
					}
					done(true)
					i++
				}
			})
		})
	}
}

// BenchmarkAllowOpen is a rejection by an open breaker.
func BenchmarkAllowOpen(b *testing.B) {
	p := benchPool(b, Config{})
	br := p.Get(keyA)
	br.OpenFor(time.Hour, SourceOperator)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("admitted")
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkIdleBreakerBytes reports the heap held per idle breaker (keys are
// allocated before the baseline, so their strings are not counted).
func BenchmarkIdleBreakerBytes(b *testing.B) {
	const n = 10000
	for b.Loop() {
		b.StopTimer()
		keys := benchKeys(n)
		p, err := New(Config{}, nil, prometheus.NewRegistry(), nil)
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		b.StartTimer()
		for _, k := range keys {
			call(p.Get(k), true)
		}
		b.StopTimer()
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "bytes/breaker")
		runtime.KeepAlive(keys)
		p.Close()
		b.StartTimer()
	}
}

// BenchmarkEvictionStream streams 1,000,000 distinct keys through a pool
// with eviction on, sweeping every 10,000 keys while a virtual clock advances
// half a TTL per sweep, and reports the peak entries and peak live heap (measured after a GC at each
// sweep).
func BenchmarkEvictionStream(b *testing.B) {
	const total, perSweep = 1_000_000, 10_000
	ttl := time.Minute
	for b.Loop() {
		p, err := New(Config{IdleTTL: ttl, EvictInterval: time.Hour}, nil, prometheus.NewRegistry(), nil)
		if err != nil {
			b.Fatal(err)
		}
		base := heapInUse()
		now := time.Now()
		var peakEntries int
		var peakHeap uint64
		for i := range total {
			call(p.Get(Key{TaskGroup: TaskGroupCallback, NamespaceID: "ns", Destination: fmt.Sprint("d", i)}), true)
			if (i+1)%perSweep == 0 {
				peakEntries = max(peakEntries, p.Len())
				live := heapInUse()
				peakHeap = max(peakHeap, live-min(base, live))
				now = now.Add(ttl / 2)
				p.EvictIdle(now)
			}
		}
		b.ReportMetric(float64(peakEntries), "peak-entries")
		b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(p.Len()), "final-entries")
		p.Close()
	}
}

// BenchmarkPoolVsRaw is the hot-path ratio the foundation issue targets,
// measured for a noisy shared machine: the pool (lookup + Allow + done)
// and raw gobreaker (map lookup + two-step Allow + done) run in
// alternating blocks of 20,000 calls, b.N pairs of blocks, so that drifts
// in the machine's load fall on both alike. ratio is the pool's total time
// over raw gobreaker's; raw-ns and pool-ns are per call. In parallel mode
// each block is split over GOMAXPROCS goroutines. (Separate runs of
// BenchmarkPoolAllow and BenchmarkRawGobreaker put the same ratio anywhere
// in 1.04–1.35× from one run to the next on the test machine; this one
// stays within a few hundredths.)
func BenchmarkPoolVsRaw(b *testing.B) {
	const block = 20000
	for _, n := range []int{1, 10000} {
		keys := benchKeys(n)
		raw := make(map[Key]*gobreaker.TwoStepCircuitBreaker[struct{}], n)
		for _, k := range keys {
			raw[k] = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: k.String()})
		}
		p := benchPool(b, Config{})
		for _, k := range keys {
			p.Get(k)
		}
		rawCalls := func(from, count int) {
			for i := from; i < from+count; i++ {
				done, err := raw[keys[i%n]].Allow()
				if err != nil {
					panic(err)
				}
				done(nil)
			}
		}
		poolCalls := func(from, count int) {
			for i := from; i < from+count; i++ {
				done, err := p.Get(keys[i%n]).Allow()
				if err != nil {
					panic(err)
				}
				done(true)
			}
		}
		for _, mode := range []string{"serial", "parallel"} {
			g := 1
			if mode == "parallel" {
				g = runtime.GOMAXPROCS(0)
			}
			timed := func(calls func(from, count int), base int) time.Duration {
				start := time.Now()
				if g == 1 {
					calls(base, block)
					return time.Since(start)
				}
				var wg sync.WaitGroup
				for w := range g {
					wg.Go(func() { calls(base+w*block/g, block/g) })
				}
				wg.Wait()
				return time.Since(start)
			}
			b.Run(fmt.Sprintf("keys=%d/%s", n, mode), func(b *testing.B) {
				var rawT, poolT time.Duration
				pairs := 0
				for b.Loop() {
					rawT += timed(rawCalls, pairs*block)
					poolT += timed(poolCalls, pairs*block)
					pairs++
				}
				calls := float64(pairs * block)
				b.ReportMetric(float64(poolT)/float64(rawT), "ratio")
				b.ReportMetric(float64(rawT.Nanoseconds())/calls, "raw-ns")
				b.ReportMetric(float64(poolT.Nanoseconds())/calls, "pool-ns")
			})
		}
	}
}
