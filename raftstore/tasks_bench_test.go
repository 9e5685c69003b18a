package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// BenchmarkSubmitTasks measures task submit throughput on 1- and 3-node
// loopback clusters (raft-boltdb, fsync on), ~200-byte requests: one task
// per raft entry with 1 and 64 writers, and batches of 100 tasks per entry
// with 8 writers. tasks/s is the figure to compare; one op is one submit
// call.
func BenchmarkSubmitTasks(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, mode := range []struct {
			writers, batch int
		}{{1, 1}, {64, 1}, {8, 100}} {
			b.Run(fmt.Sprintf("nodes=%d/writers=%d/batch=%d", nodes, mode.writers, mode.batch), func(b *testing.B) {
				leader := benchTaskCluster(b, nodes)
				req := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"` + strings.Repeat("x", 120) + `"}`)
				var seq atomic.Int64
				var mu sync.Mutex
				lat := make([]time.Duration, 0, b.N)
				var wg sync.WaitGroup
				per := (b.N + mode.writers - 1) / mode.writers
				b.ResetTimer()
				start := time.Now()
				for range mode.writers {
					wg.Go(func() {
						for range per {
							tasks := make([]state.NewTask, mode.batch)
							for i := range tasks {
								n := seq.Add(1)
								tasks[i] = state.NewTask{NamespaceID: "ns", WorkflowID: fmt.Sprintf("wf-%d", n), TaskGroup: "callbacks.Invocation",
									Destination: "http://127.0.0.1:1/cb", Request: req}
							}
							t := time.Now()
							if _, _, err := leader.SubmitTasks(context.Background(), state.SubmitTasksCommand{Tasks: tasks}); err != nil {
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
				b.ReportMetric(float64(len(lat)*mode.batch)/elapsed.Seconds(), "tasks/s")
			})
		}
	}
}

func benchTaskCluster(b *testing.B, nodes int) *Store {
	return benchTaskClusterWith(b, nodes, nil)
}

// benchTaskClusterWith is benchTaskCluster with tweak applied to every
// node's config.
func benchTaskClusterWith(b *testing.B, nodes int, tweak func(*Config)) *Store {
	c := newTestCluster(b, tweak)
	var ids []string
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		ids = append(ids, id)
		c.add(id, nodes)
	}
	c.start(ids...)
	leader := c.leader(15 * time.Second)
	ctx := context.Background()
	if _, err := leader.SetShardCount(ctx, state.SetShardCountCommand{Count: 16}); err != nil {
		b.Fatal(err)
	}
	m, _, _ := shardmap.Rebalance(mustNewMapB(b, 16), ids, nil)
	if _, err := leader.CommitShardMap(ctx, state.CommitShardMapCommand{Map: m}); err != nil {
		b.Fatal(err)
	}
	return leader
}

func mustNewMapB(b *testing.B, n int) *shardmap.Map {
	m, err := shardmap.New(n)
	if err != nil {
		b.Fatal(err)
	}
	return m
}
