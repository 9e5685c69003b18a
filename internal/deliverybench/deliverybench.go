// Package deliverybench holds the delivery workloads that node's in-process
// benchmarks and test/e2e's process benchmarks both run (issue "The
// outbound task queue" §9): the task they submit, bulk submission through
// the API, the raw-HTTP baseline and the paced latency run. Each caller
// brings its own cluster and its own way to see tasks succeed. Only
// benchmarks import it.
package deliverybench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/loadgen"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

const (
	// Batch is the tasks per POST /v1/tasks:batch of SubmitAll.
	Batch = api.MaxTaskBatchSubmit
	// Writers is SubmitAll's number of batches in flight.
	Writers = 8
	// Deadline bounds every wait of a run.
	Deadline = 3 * time.Minute
	// LatencySubmitters is the number of concurrent single submitters of
	// Latency: enough that the client does not queue while Raft keeps up.
	LatencySubmitters = 256
)

// Task is a callback task of about 100 bytes to url. reqID is sent to the
// destination as Nexus-Request-Id (the receiver records it); idempotent
// also makes it the task's request_id, so a resubmitted batch cannot
// create a task twice.
func Task(url, reqID string, idempotent bool) api.TaskSubmit {
	t := api.TaskSubmit{
		NamespaceID: "ns-bench", WorkflowID: "wf-" + reqID, TaskGroup: "callbacks.Invocation", Destination: url,
		Request: api.TaskRequest{NexusRequestID: reqID, Body: []byte(`{"result":"` + reqID + `"}`), ContentType: "application/json"},
	}
	if idempotent {
		t.RequestID = reqID
	}
	return t
}

// SubmitAll submits tasks in batches of Batch through clients in turn,
// with Writers batches in flight. Items refused as overloaded (or a whole
// batch that failed) are resubmitted after the Retry-After pause, until
// Deadline. It returns the task ids in the order of tasks.
func SubmitAll(tb testing.TB, clients []*api.Client, tasks []api.TaskSubmit) []string {
	ids := make([]string, len(tasks))
	work := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	for w := range Writers {
		wg.Go(func() {
			cl := clients[w%len(clients)]
			for start := range work {
				if err := submitBatch(cl, tasks, ids, start, min(start+Batch, len(tasks))); err != nil {
					once.Do(func() { failed = err })
				}
			}
		})
	}
	for start := 0; start < len(tasks); start += Batch {
		work <- start
	}
	close(work)
	wg.Wait()
	if failed != nil {
		tb.Fatal(failed)
	}
	return ids
}

func submitBatch(cl *api.Client, tasks []api.TaskSubmit, ids []string, from, to int) error {
	idx := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		idx = append(idx, i)
	}
	deadline := time.Now().Add(Deadline)
	for len(idx) > 0 {
		batch := make([]api.TaskSubmit, len(idx))
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
			rest = idx // 429 (every item overloaded) or a transient error
		default:
			for j, r := range res.Results {
				if r.Outcome == api.OutcomeOverloaded {
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

// RawHTTP is the baseline of the delivery figures: b.N POSTs of Task's
// request to url from one Go client (outbound's pooled client) with
// concurrency calls in flight, no queue and no Raft. It reports tasks/s
// and calls/task (1).
func RawHTTP(b *testing.B, url string, concurrency int) {
	client := transport.NewHTTPClient()
	defer client.CloseIdleConnections()
	b.ResetTimer()
	took := RawCalls(b, client, url, concurrency, "raw-", b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
	b.ReportMetric(1, "calls/task")
}

// RawCalls makes n of RawHTTP's POSTs (request ids prefix<i>) through
// client with concurrency in flight and returns the wall time they took.
func RawCalls(tb testing.TB, client *http.Client, url string, concurrency int, prefix string, n int) time.Duration {
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range work {
				t := Task(url, prefix+strconv.Itoa(i), false)
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(t.Request.Body))
				if err != nil {
					tb.Error(err)
					continue
				}
				req.Header.Set("Content-Type", t.Request.ContentType)
				req.Header.Set("Nexus-Request-Id", t.Request.NexusRequestID)
				resp, err := client.Do(req)
				if err != nil {
					tb.Error(err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	start := time.Now()
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return time.Since(start)
}

// Latency paces b.N single submits (POST /v1/tasks, spread over clients)
// at rate tasks/s and reports enqueue → delivered: from the moment a
// submit is sent to the task's first arrival at dest (one process, one
// clock; arrivals keyed by the request id prefix-<i>). waitSucceeded must
// return once every id has succeeded. Metrics: p50-ms, p99-ms, the submit
// call alone (accept-p50-ms, accept-p99-ms: Raft commit) and the rate
// reached (tasks/s).
//
// Each submitter opens its connection (GET /readyz) before the clock
// starts. Opened inside the run, the 256 connections of the first
// 128 ms at 2,000/s were measured as the cluster's latency: the first
// tasks' p99 rose to 100–140 ms on a busy hour, and at 2,000/s warm
// runs gave p99 21.1 / 20.3 / 21.3 / 27.1 ms against 24.4 / 24.0 /
// 32.5 / 32.6 cold (alternated, one binary). A client of a real cluster
// keeps its connections; the cluster itself starts cold either way.
func Latency(b *testing.B, clients []*api.Client, dest *transporttest.Destination, rate int, prefix string, idempotent bool, waitSucceeded func(ids []string)) {
	sent := make([]time.Time, b.N)
	accepted := make([]time.Duration, b.N)
	ids := make([]string, b.N)
	work := make(chan int, 1024)
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	var warm sync.WaitGroup
	warm.Add(LatencySubmitters)
	for w := range LatencySubmitters {
		wg.Go(func() {
			cl := clients[w%len(clients)]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := cl.Ready(ctx); err != nil {
				once.Do(func() { failed = err })
			}
			cancel()
			warm.Done()
			for i := range work {
				t := Task(dest.CallbackURL(), prefix+"-"+strconv.Itoa(i), idempotent)
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
	warm.Wait()
	b.ResetTimer()
	start := loadgen.Pace(b.N, rate, func(i int) { work <- i })
	close(work)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	waitSucceeded(ids)
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
		at, ok := first[prefix+"-"+strconv.Itoa(i)]
		if !ok {
			b.Fatalf("task %d succeeded but never arrived", i)
		}
		lat = append(lat, at.Sub(sent[i]))
	}
	b.ReportMetric(loadgen.QuantileMs(lat, 0.50), "p50-ms")
	b.ReportMetric(loadgen.QuantileMs(lat, 0.99), "p99-ms")
	b.ReportMetric(loadgen.QuantileMs(accepted, 0.50), "accept-p50-ms")
	b.ReportMetric(loadgen.QuantileMs(accepted, 0.99), "accept-p99-ms")
	b.ReportMetric(reached, "tasks/s")
}

// BesideDead submits b.N tasks to healthy interleaved with b.N to other
// (alive or refusing every connection, as the caller set it), in the
// batches of SubmitAll, and reports the healthy destination's tasks/s from
// the first submit until waitSucceeded returns for its tasks. prefix names
// the run's request ids.
func BesideDead(b *testing.B, clients []*api.Client, healthy, other *transporttest.Destination, prefix string, idempotent bool, waitSucceeded func(ids []string)) {
	tasks := make([]api.TaskSubmit, 0, 2*b.N)
	for i := range b.N {
		n := strconv.Itoa(i)
		tasks = append(tasks,
			Task(healthy.CallbackURL(), prefix+"h-"+n, idempotent),
			Task(other.CallbackURL(), prefix+"o-"+n, idempotent))
	}
	b.ResetTimer()
	start := time.Now()
	ids := SubmitAll(b, clients, tasks)
	healthyIDs := make([]string, 0, b.N)
	for i := 0; i < len(ids); i += 2 {
		healthyIDs = append(healthyIDs, ids[i])
	}
	waitSucceeded(healthyIDs)
	took := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
}
