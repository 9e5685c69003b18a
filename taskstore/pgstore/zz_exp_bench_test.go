package pgstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/queue"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// EXPERIMENT (not for commit): server CPU per inserted task, one store
// taking 8 writers' 500-task batches (its group commit merges them)
// against five stores taking them w%5.
func BenchmarkZZInsertSpread(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv, err := pgtest.StartWith(ctx, pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	modes := []string{"one", "five", "five-nodest"}
	stores := map[string][]*Store{}
	for _, m := range modes {
		if err := srv.Exec("CREATE DATABASE " + fmt.Sprintf("d%d", len(m))); err != nil {
			b.Fatal(err)
		}
		n := 1
		if m != "one" {
			n = 5
		}
		for range n {
			s, err := Open(ctx, Config{URL: srv.URL(fmt.Sprintf("d%d", len(m))), PollInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			stores[m] = append(stores[m], s)
		}
		if m == "five-nodest" {
			if _, err := stores[m][0].pool.Exec(ctx, "DROP INDEX fusebox_tasks_dest_pending"); err != nil {
				b.Fatal(err)
			}
		}
	}
	const N, batch, writers = 20000, 500, 8
	cpu := map[string]time.Duration{}
	wall := map[string]time.Duration{}
	ccpu := map[string]time.Duration{}
	cwall := map[string]time.Duration{}
	const cb = 64
	run := 0
	for r := range b.N + 1 {
		for k := range modes {
			m := modes[(r+k)%len(modes)]
			run++
			tasks := make([]state.NewTask, N)
			now := time.Now()
			for i := range tasks {
				wf := fmt.Sprintf("wf-%d-%d", run, i)
				tasks[i] = state.NewTask{ID: state.NewTaskID(now), Shard: shardmap.ShardOf("ns", wf, 16), NamespaceID: "ns", WorkflowID: wf,
					TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1234/cb", RequestID: fmt.Sprintf("pi%d-%d", run, i),
					Request: []byte(`{"url":"http://127.0.0.1:1234/cb","header":{"x":"y"},"body":"aGVsbG8gd29ybGQ="}`)}
			}
			work := make(chan int)
			var wg sync.WaitGroup
			c0 := pgtest.CPUOf(b, srv)
			start := time.Now()
			for w := range writers {
				s := stores[m][w%len(stores[m])]
				wg.Go(func() {
					for i := range work {
						if _, err := s.Submit(ctx, tasks[i:i+batch], time.Now()); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for i := 0; i < N; i += batch {
				work <- i
			}
			close(work)
			wg.Wait()
			if r > 0 {
				wall[m] += time.Since(start)
				cpu[m] += pgtest.CPUOf(b, srv) - c0
			}
			// Completion: each shard's owner writes its results in batches of cb, one goroutine per shard.
			if r == 0 {
				for sh := range 16 {
					st := stores[m][sh%len(stores[m])]
					if err := st.Acquire(ctx, sh, "n", 1); err != nil {
						b.Fatal(err)
					}
				}
			}
			byShard := make([][]queue.Result, 16)
			for _, t := range tasks {
				byShard[t.Shard] = append(byShard[t.Shard], queue.Result{TaskID: t.ID, Status: queue.StatusSucceeded, Attempts: 1})
			}
			c1 := pgtest.CPUOf(b, srv)
			start = time.Now()
			var wg2 sync.WaitGroup
			for sh := range 16 {
				st := stores[m][sh%len(stores[m])]
				wg2.Go(func() {
					rs := byShard[sh]
					for len(rs) > 0 {
						n := min(cb, len(rs))
						if err := st.Complete(ctx, sh, 1, rs[:n]); err != nil {
							b.Error(err)
						}
						rs = rs[n:]
					}
				})
			}
			wg2.Wait()
			if r > 0 {
				cwall[m] += time.Since(start)
				ccpu[m] += pgtest.CPUOf(b, srv) - c1
			}
		}
	}
	for _, m := range modes {
		fmt.Fprintf(os.Stderr, "%s: insert db %.1f µs/task, wall %.1f µs/task; complete db %.1f, wall %.1f\n", m, cpu[m].Seconds()*1e6/float64(b.N*N), wall[m].Seconds()*1e6/float64(b.N*N),
			ccpu[m].Seconds()*1e6/float64(b.N*N), cwall[m].Seconds()*1e6/float64(b.N*N))
	}
}
