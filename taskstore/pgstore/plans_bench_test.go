package pgstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/queue"
	"fusebox/raftstore/state"
)

// BenchmarkResultWritePlans is what planning every result write for its own
// results costs the database (plans.go): two stores on one server, each on
// a database of its own holding 60,000 analyzed tasks, one as the store
// runs (custom plans for result writes) and one whose URL sets
// plan_cache_mode=auto (generic plans, made on the analyzed table, so
// good ones). They take turns in blocks: 5,000 tasks submitted in batches
// of 500, each shard's due tasks read and completed in writes of up to 100
// results. One op is a pair of blocks. Metrics: the server's CPU per task
// on each side and custom/generic.
func BenchmarkResultWritePlans(b *testing.B) {
	srv, err := pgtest.StartWith(b.Context(), pgtest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	const shards, block, batch, write = 16, 5000, 500, 100
	var stores [2]*Store // custom, generic
	for i, param := range []string{"", "plan_cache_mode=auto&"} {
		db := fmt.Sprintf("plans%d", i)
		if err := srv.Exec("CREATE DATABASE " + db); err != nil {
			b.Fatal(err)
		}
		url := strings.Replace(srv.URL(db), "?", "?"+param, 1)
		s, err := Open(b.Context(), Config{URL: url, PollInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if s.customPlans.Load() != (i == 0) {
			b.Fatalf("store %d: custom plans %v", i, s.customPlans.Load())
		}
		for sh := range shards {
			if err := s.Acquire(b.Context(), sh, "n1", 1); err != nil {
				b.Fatal(err)
			}
		}
		seedTasks(b, s.pool, 1, 60000, "g % 16", "'succeeded'", 100)
		if _, err := s.pool.Exec(b.Context(), `ANALYZE fusebox_tasks`); err != nil {
			b.Fatal(err)
		}
		stores[i] = s
	}
	var cpu [2]time.Duration
	n := 0
	turn := func(i int) {
		s := stores[i]
		c0 := pgtest.CPUOf(b, srv)
		for range block / batch {
			tasks := make([]state.NewTask, batch)
			for j := range tasks {
				n++
				tasks[j] = state.NewTask{ID: state.NewTaskID(time.Now().Add(time.Duration(j))), Shard: j % shards, NamespaceID: "ns",
					WorkflowID: "wf", TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:9/cb",
					Request: []byte(`{"url":"http://127.0.0.1:9/cb"}`), RequestID: fmt.Sprintf("r%d", n)}
			}
			if _, err := s.Submit(b.Context(), tasks, time.Now()); err != nil {
				b.Fatal(err)
			}
			for sh := range shards {
				due, _, _ := s.Due(sh, time.Now().Add(-time.Minute), time.Now().Add(time.Minute), 1000, func(string) bool { return false })
				res := make([]queue.Result, len(due))
				for k, t := range due {
					res[k] = queue.Result{TaskID: t.ID, Status: queue.StatusSucceeded, Attempts: 1}
				}
				for k := 0; k < len(res); k += write {
					if err := s.Complete(b.Context(), sh, 1, res[k:min(k+write, len(res))]); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		cpu[i] += pgtest.CPUOf(b, srv) - c0
	}
	turn(0) // warm both up, uncounted
	turn(1)
	cpu = [2]time.Duration{}
	b.ResetTimer()
	for r := range b.N {
		turn(r % 2)
		turn(1 - r%2)
	}
	b.StopTimer()
	tasks := float64(b.N * block)
	b.ReportMetric(float64(cpu[0].Microseconds())/tasks, "custom-db-us/task")
	b.ReportMetric(float64(cpu[1].Microseconds())/tasks, "generic-db-us/task")
	b.ReportMetric(cpu[0].Seconds()/cpu[1].Seconds(), "custom/generic")
}
