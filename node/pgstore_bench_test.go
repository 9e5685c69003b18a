package node

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"fusebox/internal/deliverybench"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport/transporttest"
)

// waitSucceededPG is waitSucceeded on the postgres store: it checks ids in
// order, a chunk of 100 a query, and moves on past a chunk once all of it
// succeeded, so a poll costs the database at most 100 key lookups (the Raft
// store's wait reads one task a poll from memory). Only at the deadline does
// it look the stuck task up, to say which it waits for, as stored, and which
// of nodes claims its shard at what epoch. (Until 2026-12-03 it looked the
// stuck task up on every poll that found a chunk of 1,000 unfinished: about
// 2,500 single-task queries in a 20,000-task run, paid by the database inside
// the postgres side's time and not by the Raft side; docs/benchmarks.md.)
func waitSucceededPG(tb testing.TB, pg *pgTasks, nodes []*Node, ids []string) {
	tb.Helper()
	const chunk = 100
	next, done := 0, 0
	errNotYet := errors.New("not yet")
	err := testwait.Poll(deliverybench.Deadline, func() error {
		for next < len(ids) {
			end := min(next+chunk, len(ids))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n, err := pg.store.CountStatus(ctx, ids[next:end], state.TaskSucceeded)
			cancel()
			if err != nil {
				return err
			}
			if done = next + n; n != end-next {
				return errNotYet
			}
			next = end
		}
		return nil
	})
	if errors.Is(err, errNotYet) {
		err = stuckTask(pg, nodes, ids[next:min(next+chunk, len(ids))], done, len(ids))
	}
	if err != nil {
		tb.Fatalf("timed out after %v waiting for %d tasks to succeed: %v", deliverybench.Deadline, len(ids), err)
	}
}

// stuckTask describes the first task of chunk that has not succeeded.
func stuckTask(pg *pgTasks, nodes []*Node, chunk []string, done, total int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range chunk {
		t, ok, err := pg.store.Task(ctx, id)
		if err != nil || !ok || t.Status == state.TaskSucceeded {
			continue
		}
		var owners []string
		for _, n := range nodes {
			if epoch, ok := n.shards.Owned()[t.Shard]; ok {
				owners = append(owners, fmt.Sprintf("%s@%d", n.cfg.NodeID, epoch))
			}
		}
		return fmt.Errorf("about %d of %d succeeded; waiting for %s: %s, shard %d (claimed by %v), attempts %d, next attempt %v, message %q",
			done, total, id, t.Status, t.Shard, owners, t.Attempts, t.NextAttemptAt.Format(time.RFC3339Nano), t.Message)
	}
	return fmt.Errorf("about %d of %d succeeded", done, total)
}

// processCPU is this process's CPU time (user + system).
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeliveryStore is BenchmarkDelivery's durable delivery (3 nodes,
// batches of 500 through the three APIs, delivered and acknowledged) on
// each task store, side by side: raft (the replicated state, fsync on)
// and postgres (one local PostgreSQL server, fsync and synchronous commit
// on, shared by the three nodes; Raft then carries only the control
// plane). Issue 18's target: postgres ≥ 0.7× raft.
func BenchmarkDeliveryStore(b *testing.B) {
	dest := transporttest.NewDestination(b)
	dest.CountOnly() // a receiver that answers and forgets (transporttest.Destination.CountOnly)
	run := 0
	for _, store := range []string{TaskStoreRaft, TaskStorePostgres} {
		var mutate func(*Config)
		var srv *pgtest.Server
		if store == TaskStorePostgres {
			if _, err := pgtest.BinDir(); err != nil {
				b.Skip(err)
			}
			var err error
			srv, err = pgtest.StartWith(context.Background(), pgtest.Options{Durable: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = srv.Stop() }) // after the cluster's cleanup (LIFO)
			url := srv.URL("postgres")
			mutate = func(c *Config) { c.TaskStore, c.PostgresURL = TaskStorePostgres, url }
		}
		var bc *benchCluster
		parent := b
		b.Run(store, func(b *testing.B) {
			if bc == nil { // kept for every b.N of this sub-benchmark
				bc = startBenchClusterWith(b, parent, DefaultShards, "fast", mutate)
			}
			run++
			before := dest.Count("")
			cpu0, db0 := processCPU(b), pgtest.CPUOf(b, srv)
			b.ResetTimer()
			took := bc.deliverRun(b, run, b.N, dest.CallbackURL())
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
			b.ReportMetric(float64(dest.Count("")-before)/float64(b.N), "calls/task")
			// CPU per task: less sensitive than tasks/s to other jobs on
			// the machine. proc: this process (the three nodes, the load
			// generator and the destination); db: the PostgreSQL server.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "proc-cpu-us/task")
			b.ReportMetric(float64((pgtest.CPUOf(b, srv)-db0).Microseconds())/float64(b.N), "db-cpu-us/task")
		})
		if bc != nil { // the next store runs alone
			(&lazyCluster{m: map[int]*benchCluster{0: bc}}).close()
		}
	}
}
