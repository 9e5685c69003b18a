package breakerpool

import (
	"fmt"
	"runtime"
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
