package pgstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"fusebox/internal/loadgen"
	"fusebox/internal/pgtest"
	"fusebox/raftstore/state"
)

// BenchmarkSubmitLatency is the submit call alone on a durable server
// (fsync and synchronous commit on), as issue 18's latency benchmark makes
// it without the nodes around it: three stores (three nodes' pools) take
// single-task submits at 1,000 a second between them, and the call's
// accept-p50-ms and accept-p99-ms are reported. b.N submits.
func BenchmarkSubmitLatency(b *testing.B) {
	if _, err := pgtest.BinDir(); err != nil {
		b.Skip(err)
	}
	if b.N == 1 {
		return // the framework's probe run
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pgtest.StartWith(ctx, pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	stores := make([]*Store, 3)
	for i := range stores {
		s, err := Open(ctx, Config{URL: srv.URL("postgres"), PollInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const rate, workers = 1000, 48
	took := make([]time.Duration, b.N)
	work := make(chan int, 1024)
	var wg sync.WaitGroup
	var failed error
	var once sync.Once
	for w := range workers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for i := range work {
				t := wakeTask(i+1, i%16)
				t.RequestID = t.ID
				t.MaxDestinationBacklog, t.MaxPendingTasks = 100000, 1000000
				start := time.Now()
				if _, err := s.Submit(context.Background(), []state.NewTask{t}, start); err != nil {
					once.Do(func() { failed = err })
				}
				took[i] = time.Since(start)
			}
		})
	}
	b.ResetTimer()
	loadgen.Pace(b.N, rate, func(i int) { work <- i })
	close(work)
	wg.Wait()
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	b.ReportMetric(loadgen.QuantileMs(took, 0.50), "accept-p50-ms")
	b.ReportMetric(loadgen.QuantileMs(took, 0.99), "accept-p99-ms")
}
