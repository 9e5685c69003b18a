package breakerpool

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// BenchmarkPoolGrowth is the pool's memory growth curve (issue "make bench"):
// 10³ → 10⁶ keys, each looked up and called once (so each holds a live
// breaker with counts), with eviction off. Metrics: bytes/breaker (live heap
// after a GC, keys allocated before the baseline so their strings are not
// counted), heap-MiB (the pool's total) and ns/op (one first Get+Allow+done
// per key: insertion cost). Baseline "gobreaker": plain gobreaker two-step
// breakers in a map, same keys, same calls. Run with -benchtime=1x; the 10⁶
// case takes a few seconds and ~1 GiB.
func BenchmarkPoolGrowth(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d/pool", n), func(b *testing.B) {
			growth(b, n, func(keys []Key) func() {
				p, err := New(Config{}, nil, prometheus.NewRegistry(), nil)
				if err != nil {
					b.Fatal(err)
				}
				return func() {
					for _, k := range keys {
						call(p.Get(k), true)
					}
					runtime.KeepAlive(p)
				}
			})
		})
		b.Run(fmt.Sprintf("keys=%d/gobreaker", n), func(b *testing.B) {
			growth(b, n, func(keys []Key) func() {
				m := make(map[Key]*gobreaker.TwoStepCircuitBreaker[struct{}])
				return func() {
					for _, k := range keys {
						cb, ok := m[k]
						if !ok {
							cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: k.String()})
							m[k] = cb
						}
						if done, err := cb.Allow(); err == nil {
							done(nil)
						}
					}
					runtime.KeepAlive(m)
				}
			})
		})
	}
}

// growth runs fill (built by setup over n keys) once per iteration and
// reports the heap it holds; the last iteration's figures are reported.
func growth(b *testing.B, n int, setup func([]Key) func()) {
	var perKey, total float64
	for range b.N {
		b.StopTimer()
		keys := benchKeys(n)
		fill := setup(keys)
		before := heapInUse()
		b.StartTimer()
		fill()
		b.StopTimer()
		after := heapInUse()
		held := float64(after - min(before, after))
		perKey, total = held/float64(n), held/(1<<20)
		runtime.KeepAlive(keys)
		runtime.KeepAlive(fill) // the pool (or map) is held by fill
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(perKey, "bytes/breaker")
	b.ReportMetric(total, "heap-MiB")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
}
