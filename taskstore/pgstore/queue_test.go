package pgstore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// TestQueueDeliversFromPostgres runs the real queue on the postgres store
// and a real callback receiver: every task is delivered once and acked in
// the database. Then the shard is reassigned in the database behind the
// node's back (it is "paused"): its next results are refused, the queue
// drops the shard, and none of those writes land.
func TestQueueDeliversFromPostgres(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	dest := transporttest.NewDestination(t)
	reg, pool, exec := queueParts(t)
	own := NewFencedOwnership(queuetest.NewOwnership(map[int]uint64{0: 1, 1: 1}), s, "a", nil)
	t.Cleanup(own.Close)
	q, err := queue.New(queue.Config{NodeID: "a", RejectRetry: 20 * time.Millisecond, DrainTimeout: 5 * time.Second}, queue.Deps{
		Store: s, Ownership: own, Limits: queuetest.NewLimits(queuetest.DefaultLimits()),
		Breakers: queue.PoolBreakers(pool), Executor: exec, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	t.Cleanup(func() { _ = q.Close() })

	submit := func(prefix string, n int, shard func(i int) int) []string {
		tasks := make([]state.NewTask, n)
		ids := make([]string, n)
		for i := range tasks {
			req, _ := json.Marshal(transport.Request{URL: dest.CallbackURL(), Body: []byte(`{"ok":true}`), ContentType: "application/json"})
			ids[i] = state.NewTaskID(time.Now().Add(time.Duration(i)))
			tasks[i] = state.NewTask{ID: ids[i], Shard: shard(i), NamespaceID: "ns", WorkflowID: fmt.Sprintf("%s-%d", prefix, i),
				TaskGroup: breakerpool.TaskGroupCallback, Destination: dest.CallbackURL(), Request: req}
		}
		if _, err := s.Submit(ctx, tasks, time.Now()); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	status := func(id string) state.Task {
		tk, _, err := s.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	ids := submit("first", 40, func(i int) int { return i % 2 })
	testwait.For(t, 20*time.Second, "every task acked in the database", func() bool {
		for _, id := range ids {
			if status(id).Status != state.TaskSucceeded {
				return false
			}
		}
		return true
	})
	if n := dest.Count(transporttest.KindCallback); n != len(ids) {
		t.Fatalf("receiver saw %d callbacks for %d tasks", n, len(ids))
	}

	// Shard 0 is taken by another node while this one is paused.
	if err := s.Acquire(ctx, 0, "b", 2); err != nil {
		t.Fatal(err)
	}
	late := submit("late", 5, func(int) int { return 0 })
	testwait.For(t, 20*time.Second, "the stale owner's refused write", func() bool {
		return counter(t, reg, "fusebox_queue_completion_writes_total", "refused") > 0
	})
	for _, id := range late {
		if tk := status(id); tk.Status != state.TaskPending || tk.Attempts != 0 {
			t.Fatalf("a stale owner's write landed: %+v", tk)
		}
	}
}

// queueParts are what a queue needs beside its store and ownership: a
// registry, a real breaker pool and a real executor, closed at cleanup.
func queueParts(t *testing.T) (*prometheus.Registry, *breakerpool.Pool, *transport.Executor) {
	t.Helper()
	reg := prometheus.NewRegistry()
	pool, err := breakerpool.New(breakerpool.Config{IdleTTL: -1, DisableJitter: true}, nil, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Start()
	t.Cleanup(pool.Close)
	exec, err := transport.New(transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Close() })
	return reg, pool, exec
}

// counter sums the counters of name with a label valued outcome.
func counter(t *testing.T, g prometheus.Gatherer, name, outcome string) float64 {
	sum, _ := series(t, g, name, "", outcome)
	return sum
}

// series sums the counters of name with a label (named label, or any when
// label is "") valued value, and reports whether there is such a series.
func series(t *testing.T, g prometheus.Gatherer, name, label, value string) (sum float64, found bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value && (label == "" || l.GetName() == label) {
					sum += m.GetCounter().GetValue()
					found = true
				}
			}
		}
	}
	return sum, found
}
