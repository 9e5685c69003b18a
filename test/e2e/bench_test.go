package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"fusebox/dynconfig"
	"fusebox/transport"
	"fusebox/transport/outbound"
	"fusebox/transport/outbound/outboundtest"
)

// Delivery benchmarks on real processes (issue "The outbound task queue"
// §9): three `fusebox serve` processes on loopback, as deployed — each with
// its own runtime, scheduler and GC — fed through the HTTP API, delivering
// to an outboundtest receiver in this process (one clock for send and
// arrival). node/delivery_bench_test.go has the same workloads on three
// in-process nodes, which share one Go scheduler; docs/benchmarks.md shows
// both. One op is one task; run with a fixed count (-benchtime=20000x).

const (
	pbBatch       = transport.MaxTaskBatchSubmit // tasks per POST /v1/tasks:batch
	pbWriters     = 8                            // concurrent batch submitters
	pbConcurrency = dynconfig.DefaultGroupLimiterConcurrency
	pbDeadline    = 3 * time.Minute
)

// benchProcs is a 3-process cluster for benchmarks with the per-host rate
// limit lifted (dynconfig's default, 100 calls/s per group per host, would
// be the figure otherwise) and a larger group buffer.
type benchProcs struct {
	c       *Cluster
	clients []*transport.Client
}

// lazyProcs starts the cluster on first use and keeps it for every b.N a
// sub-benchmark is run with; the parent benchmark's cleanup stops it.
type lazyProcs struct {
	parent *testing.B
	bp     *benchProcs
}

func (l *lazyProcs) get(b *testing.B) *benchProcs {
	if l.bp != nil {
		return l.bp
	}
	c := NewCluster(l.parent, 3, ClusterOptions{LogLevel: "warn"})
	l.parent.Cleanup(func() { c.StopAll(l.parent) })
	bp := &benchProcs{c: c}
	for _, p := range c.Procs {
		bp.clients = append(bp.clients, transport.NewClient(p.HTTPAddr(), "", nil))
	}
	WaitFor(b, time.Minute, "one shard map, every shard owned and worked on", c.sameShardMap)
	bp.setConfig(b, dynconfig.KeyHostSchedulerMaxTaskRPS, "1000000")
	bp.setConfig(b, dynconfig.KeyGroupLimiterBufferSize, "1000")
	l.bp = bp
	return bp
}

// setConfig writes a global value and waits until every node serves it.
func (bp *benchProcs) setConfig(b *testing.B, key, value string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bp.clients[0].ConfigSet(ctx, key, transport.ConfigWrite{Value: []byte(value)}); err != nil {
		b.Fatalf("config %s: %v", key, err)
	}
	WaitFor(b, 30*time.Second, key+" applied on every node", func() error {
		for i, cl := range bp.clients {
			es, err := cl.ConfigGet(ctx, key)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(es, func(e transport.ConfigEntry) bool { return string(e.Value) == value }) {
				return fmt.Errorf("%s: %s not yet %s", bp.c.Procs[i].Name(), key, value)
			}
		}
		return nil
	})
}

// pbTask is a callback task of about 100 bytes to url; reqID is sent as
// Nexus-Request-Id and recorded by the receiver.
func pbTask(url, reqID string) transport.TaskSubmit {
	return transport.TaskSubmit{
		NamespaceID: "ns-bench", WorkflowID: "wf-" + reqID, TaskGroup: "callbacks.Invocation", Destination: url,
		RequestID: reqID,
		Request:   transport.TaskRequest{NexusRequestID: reqID, Body: []byte(`{"result":"` + reqID + `"}`), ContentType: "application/json"},
	}
}

// submitAll submits tasks in batches through the nodes in turn with
// pbWriters batches in flight; overloaded items are resubmitted after the
// Retry-After pause. It returns the task ids in the order of tasks.
func (bp *benchProcs) submitAll(b *testing.B, tasks []transport.TaskSubmit) []string {
	ids := make([]string, len(tasks))
	work := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	for w := range pbWriters {
		wg.Go(func() {
			cl := bp.clients[w%len(bp.clients)]
			for start := range work {
				if err := pbSubmitBatch(cl, tasks, ids, start, min(start+pbBatch, len(tasks))); err != nil {
					once.Do(func() { failed = err })
				}
			}
		})
	}
	for start := 0; start < len(tasks); start += pbBatch {
		work <- start
	}
	close(work)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return ids
}

func pbSubmitBatch(cl *transport.Client, tasks []transport.TaskSubmit, ids []string, from, to int) error {
	idx := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		idx = append(idx, i)
	}
	deadline := time.Now().Add(pbDeadline)
	for len(idx) > 0 {
		batch := make([]transport.TaskSubmit, len(idx))
		for j, i := range idx {
			batch[j] = tasks[i]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cl.SubmitTasks(ctx, batch)
		cancel()
		var rest []int
		switch {
		case err != nil && time.Now().After(deadline):
			return err
		case err != nil:
			rest = idx // 429 (every item overloaded) or a transient error; request ids make it safe
		default:
			for j, r := range res.Results {
				if r.Outcome == transport.OutcomeOverloaded {
					rest = append(rest, idx[j])
				} else {
					ids[idx[j]] = r.TaskID
				}
			}
		}
		if len(rest) > 0 {
			time.Sleep(100 * time.Millisecond) // Retry-After
		}
		idx = rest
	}
	return nil
}

// waitSucceeded waits until every task of ids has succeeded (its result is
// committed to Raft) in node n1's replica. It first waits, at no cost to
// the cluster, until the receiver has had at least len(ids) calls (arrived
// counts them), then pages through the task listing from the run's first
// id (1,000 tasks a request) until every one is succeeded: tens of
// requests, where a GET per task would cost the cluster as much as the
// delivery it measures.
func (bp *benchProcs) waitSucceeded(b *testing.B, ids []string, arrived func() int) {
	b.Helper()
	deadline := time.Now().Add(pbDeadline)
	for arrived() < len(ids) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks arrived at the receiver within %s", arrived(), len(ids), pbDeadline)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	first := slices.Min(ids)
	cl := bp.clients[0]
	for {
		if t, err := cl.Task(context.Background(), first); err == nil && t.Status == "succeeded" {
			delete(want, first)
		}
		after := first
		for after != "" && len(want) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			page, err := cl.Tasks(ctx, transport.TaskListQuery{After: after, Limit: transport.MaxTaskListLimit})
			cancel()
			if err != nil {
				b.Fatalf("list tasks: %v", err)
			}
			for _, t := range page.Tasks {
				if t.Status == "succeeded" {
					delete(want, t.ID)
				}
			}
			after = page.Next
		}
		if len(want) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks not succeeded after %s", len(want), len(ids), pbDeadline)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// BenchmarkProcessDelivery is sustained durable delivery on three
// processes: b.N callback tasks submitted in batches of 500 through the
// three APIs, committed to Raft, delivered by the shard owners and
// acknowledged (succeeded) in Raft. Baseline raw_http: the same POSTs from
// one Go client with the cluster's delivery concurrency (3 × group
// concurrency), no queue.
func BenchmarkProcessDelivery(b *testing.B) {
	dest := outboundtest.NewDestination(b)
	procs := &lazyProcs{parent: b}
	run := 0
	b.Run("cluster", func(b *testing.B) {
		bp := procs.get(b)
		run++
		tasks := make([]transport.TaskSubmit, b.N)
		for i := range tasks {
			tasks[i] = pbTask(dest.CallbackURL(), fmt.Sprintf("pd%d-%d", run, i))
		}
		before := dest.Count("")
		b.ResetTimer()
		start := time.Now()
		ids := bp.submitAll(b, tasks)
		bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before })
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
		b.ReportMetric(float64(dest.Count("")-before)/float64(b.N), "calls/task")
	})
	b.Run("raw_http", func(b *testing.B) {
		client := outbound.NewHTTPClient()
		defer client.CloseIdleConnections()
		work := make(chan int)
		var wg sync.WaitGroup
		for range 3 * pbConcurrency {
			wg.Go(func() {
				for i := range work {
					t := pbTask(dest.CallbackURL(), "raw-"+strconv.Itoa(i))
					req, err := http.NewRequest(http.MethodPost, dest.CallbackURL(), bytes.NewReader(t.Request.Body))
					if err != nil {
						b.Error(err)
						continue
					}
					req.Header.Set("Content-Type", t.Request.ContentType)
					req.Header.Set("Nexus-Request-Id", t.Request.NexusRequestID)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			})
		}
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			work <- i
		}
		close(work)
		wg.Wait()
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
		b.ReportMetric(1, "calls/task")
	})
}

// BenchmarkProcessDeliveryLatency paces single submits (POST /v1/tasks,
// spread over the three processes) at 1,000 tasks/s and reports enqueue →
// delivered: from the moment a submit is sent to the task's first arrival
// at the receiver. accept-*-ms is the submit call alone (Raft commit);
// tasks/s is the rate reached (256 submitters, so the client does not
// queue while Raft keeps up).
func BenchmarkProcessDeliveryLatency(b *testing.B) {
	const rate = 1000
	dest := outboundtest.NewDestination(b)
	procs := &lazyProcs{parent: b}
	run := 0
	b.Run("rate=1000", func(b *testing.B) {
		bp := procs.get(b)
		run++
		before := dest.Count("")
		sent := make([]time.Time, b.N)
		accepted := make([]time.Duration, b.N)
		ids := make([]string, b.N)
		work := make(chan int, 1024)
		var wg sync.WaitGroup
		var once sync.Once
		var failed error
		for w := range 256 {
			wg.Go(func() {
				cl := bp.clients[w%len(bp.clients)]
				for i := range work {
					t := pbTask(dest.CallbackURL(), fmt.Sprintf("pl%d-%d", run, i))
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					sent[i] = time.Now()
					acc, err := cl.SubmitTask(ctx, t)
					accepted[i] = time.Since(sent[i])
					cancel()
					if err != nil {
						once.Do(func() { failed = err })
						continue
					}
					ids[i] = acc.TaskID
				}
			})
		}
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / rate)); d > 0 {
				time.Sleep(d) // pacing the load, not waiting for a condition
			}
			work <- i
		}
		close(work)
		wg.Wait()
		if failed != nil {
			b.Fatal(failed)
		}
		bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before })
		b.StopTimer()
		reached := float64(b.N) / time.Since(start).Seconds()

		first := map[string]time.Time{}
		for _, c := range dest.Calls() {
			if at, ok := first[c.RequestID]; !ok || c.At.Before(at) {
				first[c.RequestID] = c.At
			}
		}
		lat := make([]time.Duration, 0, b.N)
		for i := range b.N {
			at, ok := first[fmt.Sprintf("pl%d-%d", run, i)]
			if !ok {
				b.Fatalf("task %d succeeded but never arrived", i)
			}
			lat = append(lat, at.Sub(sent[i]))
		}
		b.ReportMetric(pbQuantileMs(lat, 0.50), "p50-ms")
		b.ReportMetric(pbQuantileMs(lat, 0.99), "p99-ms")
		b.ReportMetric(pbQuantileMs(accepted, 0.50), "accept-p50-ms")
		b.ReportMetric(pbQuantileMs(accepted, 0.99), "accept-p99-ms")
		b.ReportMetric(reached, "tasks/s")
	})
}

func pbQuantileMs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

// BenchmarkProcessDeliveryBesideDead is a healthy destination's delivery
// throughput while another destination, fed the same number of tasks in
// the same batches, refuses every connection (other_dead), beside the same
// load with both healthy (both_healthy). tasks/s counts the healthy
// destination's tasks from the first submit until the last succeeded.
func BenchmarkProcessDeliveryBesideDead(b *testing.B) {
	procs := &lazyProcs{parent: b}
	run := 0
	for _, mode := range []string{"both_healthy", "other_dead"} {
		healthy, other := outboundtest.NewDestination(b), outboundtest.NewDestination(b)
		if mode == "other_dead" {
			if err := other.SetMode(outboundtest.ModeRefuse); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(mode, func(b *testing.B) {
			bp := procs.get(b)
			run++
			before := healthy.Count("")
			tasks := make([]transport.TaskSubmit, 0, 2*b.N)
			for i := range b.N {
				tasks = append(tasks,
					pbTask(healthy.CallbackURL(), fmt.Sprintf("ph%d-%d", run, i)),
					pbTask(other.CallbackURL(), fmt.Sprintf("po%d-%d", run, i)))
			}
			b.ResetTimer()
			start := time.Now()
			ids := bp.submitAll(b, tasks)
			healthyIDs := make([]string, 0, b.N)
			for i := 0; i < len(ids); i += 2 {
				healthyIDs = append(healthyIDs, ids[i])
			}
			bp.waitSucceeded(b, healthyIDs, func() int { return healthy.Count("") - before })
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
		})
	}
}
