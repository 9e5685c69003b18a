package pgstore

import (
	"context"

	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/queue"
	"fusebox/raftstore"
	"fusebox/raftstore/raftstoretest"
	"fusebox/raftstore/state"
)

// lifecycle is a store's submit and complete, as the benchmark drives them.
type lifecycle interface {
	submit(ctx context.Context, tasks []state.NewTask) error
	complete(ctx context.Context, shard int, results []queue.Result) error
}

type pgLifecycle struct{ s *Store }

func (l pgLifecycle) submit(ctx context.Context, tasks []state.NewTask) error {
	_, err := l.s.Submit(ctx, tasks, time.Now())
	return err
}

func (l pgLifecycle) complete(ctx context.Context, shard int, results []queue.Result) error {
	return l.s.Complete(ctx, shard, 1, results)
}

type raftLifecycle struct{ rs *raftstore.Store }

func (l raftLifecycle) submit(ctx context.Context, tasks []state.NewTask) error {
	_, idx, err := l.rs.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: tasks})
	if err != nil {
		return err
	}
	return l.rs.WaitForApplied(ctx, idx)
}

func (l raftLifecycle) complete(ctx context.Context, shard int, results []queue.Result) error {
	epoch := l.rs.Reader().ShardMap().Shards[shard].Epoch
	_, err := l.rs.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: shard, Epoch: epoch, Node: "n1", Results: results})
	return err
}

// BenchmarkTaskLifecycle is one node's store alone, fsync on for both:
// batches of 100 tasks submitted (one statement / one Raft entry), then
// completed as succeeded (one fenced write), one writer. The figure is
// tasks/s through submit and ack; it is not the 3-node durable
// delivery figure (that needs the node wired to the store).
func BenchmarkTaskLifecycle(b *testing.B) {
	const batch = 100
	run := func(b *testing.B, l lifecycle) {
		ctx := b.Context()
		b.ResetTimer()
		start := time.Now()
		for done := 0; done < b.N; done += batch {
			tasks := make([]state.NewTask, batch)
			results := make([]queue.Result, batch)
			for i := range tasks {
				id := state.NewTaskID(time.Now().Add(time.Duration(i)))
				// Shard 0 only: the raft store derives the shard from the
				// workflow, so the same workflow keeps both stores alike.
				tasks[i] = state.NewTask{ID: id, Shard: 0, NamespaceID: "ns", WorkflowID: "wf-bench", TaskGroup: "callbacks.Invocation",
					Destination: "http://127.0.0.1:9/cb", Request: []byte(`{"url":"http://127.0.0.1:9/cb"}`)}
				results[i] = queue.Result{TaskID: id, Status: queue.StatusSucceeded, Attempts: 1}
			}
			if err := l.submit(ctx, tasks); err != nil {
				b.Fatal(err)
			}
			if err := l.complete(ctx, 0, results); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
	}
	b.Run("raft", func(b *testing.B) {
		rs := raftstoretest.SingleNode(b, "n1", 1)
		run(b, raftLifecycle{rs})
	})
	b.Run("postgres", func(b *testing.B) {
		if _, err := pgtest.BinDir(); err != nil {
			b.Skip(err)
		}
		srv, err := pgtest.StartWith(b.Context(), pgtest.Options{Durable: true})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = srv.Stop() }()
		s, err := Open(b.Context(), Config{URL: srv.URL("postgres")})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if err := s.Acquire(b.Context(), 0, "n1", 1); err != nil {
			b.Fatal(err)
		}
		run(b, pgLifecycle{s})
	})
}
