package breakerpool

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// scrapeText serves one scrape of h in the text format (no compression),
// as Prometheus would fetch it, and returns its size in bytes.
func scrapeText(b *testing.B, h http.Handler) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		b.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.Len()
}

// BenchmarkScrape20k: one scrape of a pool holding 20,000 destinations
// (each called, 1 % of them open, over 10 namespaces), with the series cap
// off (every breaker its own series: the baseline) and at the default
// limit, on the same pool and registry in the same run. Reports the scrape's
// size (bytes/scrape) beside its time (ns/op).
func BenchmarkScrape20k(b *testing.B) {
	const n = 20_000
	var limit atomic.Int64
	src, err := NewStaticSource(DefaultSettings())
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p, err := New(Config{DisableJitter: true, IdleTTL: -1, SeriesLimit: func() int { return int(limit.Load()) }}, src, reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	p.Start()
	defer p.Close()
	for i := range n {
		br := p.Get(Key{TaskGroup: TaskGroupNexusInvocation, NamespaceID: fmt.Sprintf("ns-%d", i%10),
			Destination: fmt.Sprintf("endpoint-%05d", i)})
		for range 1 + i%7 {
			if done, err := br.Allow(); err == nil {
				done(true)
			}
		}
		if i%100 == 0 {
			br.OpenFor(DefaultSettings().Timeout.D(), SourceOperator)
		}
	}
	for _, c := range []struct {
		name  string
		limit int64
	}{{"cap=off", -1}, {fmt.Sprintf("cap=%d", DefaultSeriesLimit), DefaultSeriesLimit}} {
		b.Run(c.name, func(b *testing.B) {
			limit.Store(c.limit)
			h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			scrapeText(b, h) // settle the selection
			size := 0
			b.ResetTimer()
			for range b.N {
				size += scrapeText(b, h)
			}
			b.ReportMetric(float64(size)/float64(b.N), "bytes/scrape")
		})
	}
}
