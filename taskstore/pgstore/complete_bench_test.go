package pgstore

import (
	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/queue"
	"fusebox/raftstore/state"
)

// BenchmarkCompleteAfterBurst is Complete's cost right after a burst of
// submits, before autovacuum has analysed the table: 20,000 pending tasks
// over 16 shards, then b.N results written in batches of 50 to one shard
// (as a shard's queue flushes them). Issue 18: in the delivery benchmarks
// this statement took about 40 % of the database's statement time (its
// plan and its cost: pgstore/DESIGN.md). µs/task is the time of
// a Complete per result.
func BenchmarkCompleteAfterBurst(b *testing.B) {
	const shards, perShard, batch = 16, 1250, 50
	s, err := Open(b.Context(), Config{URL: pgtest.NewDatabase(b), PollInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	ctx := b.Context()
	for sh := range shards {
		if err := s.Acquire(ctx, sh, "n1", 1); err != nil {
			b.Fatal(err)
		}
	}
	mk := func(round int) []state.NewTask {
		tasks := make([]state.NewTask, 0, shards*perShard)
		for i := range shards * perShard {
			t := wakeTask(round*1_000_000+i, i%shards)
			tasks = append(tasks, t)
		}
		return tasks
	}
	round := 0
	var ids []string
	next := 0
	refill := func() {
		round++
		tasks := mk(round)
		for i := 0; i < len(tasks); i += maxGroupTasks {
			if _, err := s.Submit(ctx, tasks[i:min(i+maxGroupTasks, len(tasks))], time.Now()); err != nil {
				b.Fatal(err)
			}
		}
		ids = ids[:0]
		for _, t := range tasks {
			if t.Shard == 0 {
				ids = append(ids, t.ID)
			}
		}
		next = 0
	}
	refill()
	b.ResetTimer()
	start := time.Now()
	var paused time.Duration
	for done := 0; done < b.N; {
		if next+batch > len(ids) {
			p := time.Now()
			refill()
			paused += time.Since(p)
		}
		n := min(batch, b.N-done)
		res := make([]queue.Result, n)
		for i := range res {
			res[i] = queue.Result{TaskID: ids[next+i], Status: queue.StatusSucceeded, Attempts: 1, HTTPStatus: 200}
		}
		next += n
		if err := s.Complete(ctx, 0, 1, res); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	b.ReportMetric(float64((time.Since(start)-paused).Microseconds())/float64(b.N), "µs/task")
}
