package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/internal/loadgen"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// BenchmarkPacedSubmits is the Raft side of node's BenchmarkDeliveryLatency
// rate=2000: single-task submits paced at 2,000 a second, spread over the
// three nodes (so two thirds are forwarded to the leader), each waiting
// until its own node applied it (the API's read-your-writes), from 256
// submitters. No HTTP and no delivery: what group commit, forwarding and
// Raft cost a submit. accept-p99-ms is the figure; tasks/s the rate
// reached. Sub-benchmarks by log store: raft-boltdb and raft-wal (the
// default).
func BenchmarkPacedSubmits(b *testing.B) {
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		b.Run(kind, func(b *testing.B) { pacedSubmits(b, kind) })
	}
}

func pacedSubmits(b *testing.B, kind string) {
	const rate, submitters = 2000, 256
	nodes := startShardedN3(b, func(cfg *Config) { cfg.LogStore = kind })
	accepted := make([]time.Duration, b.N)
	work, wg := startSubmitters(b, context.Background(), nodes, submitters, accepted)
	b.ResetTimer()
	start := loadgen.Pace(b.N, rate, func(i int) { work <- i })
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(loadgen.QuantileMs(accepted, 0.50), "accept-p50-ms")
	b.ReportMetric(loadgen.QuantileMs(accepted, 0.99), "accept-p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tasks/s")
}

// startShardedN3 starts three nodes (tweak applied to each one's config)
// and a shard count of 16, and returns the nodes once each knows it.
func startShardedN3(b *testing.B, tweak func(*Config)) []*Store {
	c := newTestCluster(b, tweak)
	ids := []string{"n1", "n2", "n3"}
	for _, id := range ids {
		c.add(id, 3)
	}
	c.start(ids...)
	leader := c.leader(15 * time.Second)
	if _, err := leader.SetShardCount(context.Background(), state.SetShardCountCommand{Count: 16}); err != nil {
		b.Fatal(err)
	}
	nodes := []*Store{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	testwait.For(b, 10*time.Second, "the shard count on every node", func() bool {
		return nodes[0].Reader().ShardCount() > 0 && nodes[1].Reader().ShardCount() > 0 && nodes[2].Reader().ShardCount() > 0
	})
	return nodes
}

// startSubmitters starts n goroutines that, for each i received on work,
// submit one single-task write through nodes[worker % len(nodes)] (group
// commit, forward, commit) and wait for its apply there, recording the
// time in accepted[i]. Close work and wait on wg to end them.
func startSubmitters(b *testing.B, ctx context.Context, nodes []*Store, n int, accepted []time.Duration) (chan<- int, *sync.WaitGroup) {
	req := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"` + strings.Repeat("x", 120) + `"}`)
	work := make(chan int, 1024)
	wg := &sync.WaitGroup{}
	for w := range n {
		wg.Go(func() {
			s := nodes[w%len(nodes)]
			for i := range work {
				t := time.Now()
				_, idx, err := s.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: []state.NewTask{{NamespaceID: "ns", WorkflowID: fmt.Sprintf("wf-%d", i),
					TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: req}}})
				if err == nil {
					err = s.WaitForApplied(ctx, idx)
				}
				if err != nil {
					b.Error(err)
				}
				accepted[i] = time.Since(t)
			}
		})
	}
	return work, wg
}
