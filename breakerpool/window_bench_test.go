package breakerpool

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkCountsRead is a read of a closed breaker's counts (what GET
// /v1/breakers and each scrape do per breaker) holding 3 failures, with
// Interval 0 (nothing to advance) and with a fixed 1-minute window (the
// read checks whether to advance it), and of an empty 1-minute window.
func BenchmarkCountsRead(b *testing.B) {
	for _, c := range []struct {
		interval time.Duration
		failures uint32
	}{{0, 3}, {time.Minute, 3}, {time.Minute, 0}} {
		b.Run(fmt.Sprintf("interval=%s/failures=%d", c.interval, c.failures), func(b *testing.B) {
			s := DefaultSettings()
			s.Interval = Duration(c.interval)
			src, err := NewStaticSource(s)
			if err != nil {
				b.Fatal(err)
			}
			p, err := New(Config{}, src, prometheus.NewRegistry(), nil)
			if err != nil {
				b.Fatal(err)
			}
			p.Start()
			b.Cleanup(p.Close)
			br := p.Get(keyA)
			for range c.failures {
				call(br, false)
			}
			b.ReportAllocs()
			for b.Loop() {
				if br.Counts().ConsecutiveFailures != c.failures {
					b.Fatal("counts lost")
				}
			}
		})
	}
}
