package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/raftstore/state"
)

func reportLatencies(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

func benchCluster(b *testing.B) (*testCluster, *Store) {
	c := newTestCluster(b, nil)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	return c, c.leader(15 * time.Second)
}

// BenchmarkApply measures raft apply throughput and latency on a 3-node
// loopback cluster (raft-boltdb, fsync on), 128-byte config values.
func BenchmarkApply(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			_, leader := benchCluster(b)
			value := json.RawMessage(`{"pad":"` + strings.Repeat("x", 100) + `"}`)
			var mu sync.Mutex
			lat := make([]time.Duration, 0, b.N)
			var wg sync.WaitGroup
			per := (b.N + writers - 1) / writers
			b.ResetTimer()
			start := time.Now()
			for w := range writers {
				wg.Go(func() {
					for i := range per {
						cmd, err := state.EncodeCommand(state.MsgSetConfig, state.SetConfigCommand{CommandMeta: state.CommandMeta{At: time.Now()}, Key: fmt.Sprintf("w%d.k%d", w, i%16), Value: value})
						if err != nil {
							b.Error(err)
							return
						}
						t := time.Now()
						if _, err := leader.Apply(context.Background(), cmd, ""); err != nil {
							b.Error(err)
							return
						}
						d := time.Since(t)
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			reportLatencies(b, lat, elapsed)
		})
	}
}

// BenchmarkConfigVisibleEverywhere measures a config write issued on a
// follower (forwarded) until it is applied on all three nodes.
func BenchmarkConfigVisibleEverywhere(b *testing.B) {
	c, _ := benchCluster(b)
	f := c.follower()
	lat := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		t := time.Now()
		e, err := f.SetConfig(ctx, state.SetConfigCommand{Key: "bench", Value: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range c.nodes {
			if err := s.WaitForApplied(ctx, e.Index); err != nil {
				b.Fatal(err)
			}
		}
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatencies(b, lat, elapsed)
}
