package queue_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

func benchLimits() queuetest.LimitValues {
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS, lim.BufferSize = 1e6, 1000
	return lim
}

// runBatch adds n callback tasks per destination and returns how long the
// tasks of the first destination took to succeed.
func runBatch(b *testing.B, e *env, round int, n int, dests map[string]string, first string) time.Duration {
	var all []queue.Task
	for name, url := range dests {
		for i := range n {
			all = append(all, callback(fmt.Sprintf("%s-%d-%d", name, round, i), i%4, name, url))
		}
	}
	before := e.store.Done(first)
	start := time.Now()
	if err := e.store.Add(all...); err != nil {
		b.Fatal(err)
	}
	for e.store.Done(first) < before+n {
		if time.Since(start) > time.Minute {
			b.Fatal("benchmark batch did not finish in a minute")
		}
		time.Sleep(time.Millisecond)
	}
	d := time.Since(start)
	if got := e.store.Count(queue.StatusSucceeded); got < n {
		b.Fatalf("%d succeeded, want ≥ %d", got, n)
	}
	return d
}

// BenchmarkThroughput: tasks through the whole pipeline (in-memory store,
// real breaker pool, real executor) to a loopback destination, beside raw
// HTTP POSTs of the same body with the same concurrency (100).
func BenchmarkThroughput(b *testing.B) {
	dest := transporttest.NewDestination(b)
	b.Run("queue", func(b *testing.B) {
		e := newEnv(b, 4, benchLimits())
		e.start(b, fastCfg(), newExecutor(b), nil)
		b.ResetTimer()
		runBatch(b, e, 0, b.N, map[string]string{"d": dest.CallbackURL()}, "d")
		b.StopTimer()
	})
	b.Run("raw_http", func(b *testing.B) {
		client := transport.NewHTTPClient()
		defer client.CloseIdleConnections()
		body := []byte(`{"ok":true}`)
		work := make(chan struct{})
		var wg sync.WaitGroup
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					resp, err := client.Post(dest.CallbackURL(), "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
					}
				}
			}()
		}
		b.ResetTimer()
		for range b.N {
			work <- struct{}{}
		}
		close(work)
		wg.Wait()
	})
}

// BenchmarkHealthyBesideDead: a healthy destination's throughput while
// another destination on the same node refuses every connection, beside
// the same load with both healthy. Compare the ns/op of the two.
func BenchmarkHealthyBesideDead(b *testing.B) {
	for _, mode := range []string{"both_healthy", "other_dead"} {
		b.Run(mode, func(b *testing.B) {
			healthy, other := transporttest.NewDestination(b), transporttest.NewDestination(b)
			if mode == "other_dead" {
				if err := other.SetMode(transporttest.ModeRefuse); err != nil {
					b.Fatal(err)
				}
			}
			e := newEnv(b, 4, benchLimits())
			e.start(b, fastCfg(), newExecutor(b), nil)
			b.ResetTimer()
			runBatch(b, e, 0, b.N, map[string]string{"healthy": healthy.CallbackURL(), "other": other.CallbackURL()}, "healthy")
			b.StopTimer()
		})
	}
}

// BenchmarkDeadBacklogWrites: the result writes a dead destination's backlog
// costs while its breaker stays open. b.N tasks of one key, its breaker held
// open (1 s periods, renewed), none ever called; once every task has been
// refused and written back once, the rows written over the next
// deadWindow are counted. rate=1000: the key's rate limit, so refused
// tasks come due in turns of 1 ms (blockedTurn); rate=unlimited: no rate
// bound, every refused task due at the breaker's probe or its gentle
// backoff (the behaviour before turns, the baseline). Metrics: writes/task
// (rows in the window per task of the backlog) and writes/s.
func BenchmarkDeadBacklogWrites(b *testing.B) {
	const deadWindow = 6 * time.Second
	for _, mode := range []string{"rate=unlimited", "rate=1000"} {
		b.Run(mode, func(b *testing.B) {
			lim := benchLimits()
			lim.MaxTaskRPS = math.Inf(1)
			if mode == "rate=1000" {
				lim.MaxTaskRPS = 1000
			}
			e := newEnv(b, 4, lim)
			br := e.pool.Get(key("dead"))
			br.OpenFor(time.Second, breakerpool.SourceLocal)
			stop := make(chan struct{})
			held := make(chan struct{})
			go func() { // keeps the breaker open: renewed before each period ends
				defer close(held)
				tick := time.NewTicker(200 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						br.OpenFor(time.Second, breakerpool.SourceLocal)
					}
				}
			}()
			defer func() { close(stop); <-held }()
			e.start(b, fastCfg(), newFakeExec(false), nil)
			tasks := callbacks(b.N, 4, fmt.Sprintf("dead-%d", b.N), "dead")
			b.ResetTimer()
			if err := e.store.Add(tasks...); err != nil {
				b.Fatal(err)
			}
			// The first pass: every task refused and written back once.
			testwait.For(b, time.Minute, "every task refused and written back", func() bool { return e.store.Rows() >= b.N })
			rows0, t0 := e.store.Rows(), time.Now()
			time.Sleep(deadWindow) // the window measured: the queue works meanwhile
			rows, took := e.store.Rows()-rows0, time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(rows)/float64(b.N), "writes/task")
			b.ReportMetric(float64(rows)/took.Seconds(), "writes/s")
		})
	}
}
