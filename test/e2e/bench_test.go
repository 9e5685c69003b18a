package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// Delivery benchmarks on real processes (issue "The outbound task queue"
// §9): three `fusebox serve` processes on loopback, as deployed — each with
// its own runtime, scheduler and GC — fed through the HTTP API, delivering
// to a transporttest receiver in this process (one clock for send and
// arrival). node/delivery_bench_test.go has the same workloads on three
// in-process nodes, which share one Go scheduler; docs/benchmarks.md shows
// both. One op is one task; run with a fixed count (-benchtime=20000x).

// pbConcurrency is the per-host group concurrency; the raw-HTTP baseline
// runs 3× this many calls at once, as the three nodes can.
const pbConcurrency = dynconfig.DefaultGroupLimiterConcurrency

// benchProcs is a 3-process cluster for benchmarks with the per-host rate
// limit lifted (dynconfig's default, 100 calls/s per group per host, would
// be the figure otherwise) and a larger group buffer.
type benchProcs struct {
	c       *Cluster
	clients []*api.Client
}

// lazyProcs starts the cluster on first use and keeps it for every b.N a
// sub-benchmark is run with; the parent benchmark's cleanup stops it.
type lazyProcs struct {
	parent *testing.B
	bp     *benchProcs
	// opts start the cluster (LogLevel is set to warn); zero: plain.
	opts ClusterOptions
}

func (l *lazyProcs) get(b *testing.B) *benchProcs {
	if l.bp != nil {
		return l.bp
	}
	l.bp = startBenchProcs(b, l.parent, 3, l.opts)
	return l.bp
}

// setConfig writes a global value and waits until every node serves it.
func (bp *benchProcs) setConfig(b *testing.B, key, value string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bp.clients[0].ConfigSet(ctx, key, api.ConfigWrite{Value: []byte(value)}); err != nil {
		b.Fatalf("config %s: %v", key, err)
	}
	testwait.ForErr(b, 30*time.Second, key+" applied on every node", func() error {
		for i, cl := range bp.clients {
			es, err := cl.ConfigGet(ctx, key)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(es, func(e api.ConfigEntry) bool { return string(e.Value) == value }) {
				return fmt.Errorf("%s: %s not yet %s", bp.c.Procs[i].Name(), key, value)
			}
		}
		return nil
	})
}

// waitSucceeded waits until every task of ids has succeeded (its result is
// committed) in node n1's view. It first waits, at no cost to the cluster,
// until the receiver has had at least len(ids) calls (arrived counts them).
// Then it asks n1 only for what is not done: the tasks of ids still pending
// (status=pending from the run's first id, a few pages of those alone),
// again every 10 ms until there are none, and then whether any of them
// failed or was dead-lettered (the status index): none, so all succeeded.
// It used to page through every task of the run and read their statuses:
// for 20,000 tasks on three processes that took 450–500 ms of a 3 s
// measurement (n1 encoding 20,000 tasks as JSON, the test decoding them),
// 15 % of the figure, which raw HTTP's side of the benchmark does not pay.
func (bp *benchProcs) waitSucceeded(b *testing.B, ids []string, arrived func() int) {
	b.Helper()
	deadline := time.Now().Add(deliverybench.Deadline)
	for arrived() < len(ids) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks arrived at the receiver within %s", arrived(), len(ids), deliverybench.Deadline)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	first := slices.Min(ids)
	cl := bp.clients[0]
	bp.waitHoldsSubmits(b, deadline)
	for {
		n := countStatus(b, cl, want, first, "pending")
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks still pending after %s", n, len(ids), deliverybench.Deadline)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	for _, st := range []string{"failed", "dlq"} {
		if n := countStatus(b, cl, want, "", st); n > 0 {
			b.Fatalf("%d of %d tasks ended %s", n, len(ids), st)
		}
	}
}

// waitHoldsSubmits waits until n1's replica holds every submit made so far,
// so that a task missing from its view cannot pass for one no longer
// pending. Called once every call has reached the receiver: each task's
// submit was applied on its owner before the owner made its call, so n1
// having applied as far as any node has is enough.
// (With the PostgreSQL task store the view is the database's, and this
// waits on the control plane's log only.)
func (bp *benchProcs) waitHoldsSubmits(b *testing.B, deadline time.Time) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var top uint64
	for i, cl := range bp.clients {
		ri, err := cl.Raft(ctx)
		if err != nil {
			b.Fatalf("%s: raft: %v", bp.c.Procs[i].Name(), err)
		}
		top = max(top, ri.AppliedIndex)
	}
	for {
		ri, err := bp.clients[0].Raft(ctx)
		if err != nil {
			b.Fatalf("n1: raft: %v", err)
		}
		if ri.AppliedIndex >= top {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("n1 applied %d, another node %d, after %s", ri.AppliedIndex, top, deliverybench.Deadline)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// countStatus counts the tasks of want whose status is st in cl's view,
// listing the tasks of that status with ids from first (all of them when
// first is empty).
func countStatus(b *testing.B, cl *api.Client, want map[string]bool, first, st string) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	if first != "" { // the listing starts after an id: first is looked up alone
		t, err := cl.Task(ctx, first)
		if err != nil {
			b.Fatalf("task %s: %v", first, err)
		}
		if t.Status == st {
			n++
		}
	}
	for after := first; ; {
		page, err := cl.Tasks(ctx, api.TaskListQuery{Status: st, After: after, Limit: api.MaxTaskListLimit})
		if err != nil {
			b.Fatalf("list %s tasks: %v", st, err)
		}
		for _, t := range page.Tasks {
			if want[t.ID] {
				n++
			}
		}
		if page.Next == "" {
			return n
		}
		after = page.Next
	}
}

// BenchmarkProcessDelivery is sustained durable delivery on three
// processes: b.N callback tasks submitted in batches of 500 through the
// three APIs, committed to Raft, delivered by the shard owners and
// acknowledged (succeeded) in Raft. Baseline raw_http: the same POSTs from
// one Go client with the cluster's delivery concurrency (3 × group
// concurrency), no queue. node-cpu-us/task is the three processes' CPU
// (user + system) per task; FUSEBOX_BENCH_PPROF=dir profiles them.
func BenchmarkProcessDelivery(b *testing.B) {
	dest := transporttest.NewDestination(b)
	dest.CountOnly() // a receiver that answers and forgets (transporttest.Destination.CountOnly)
	procs := &lazyProcs{parent: b}
	run := 0
	b.Run("cluster", func(b *testing.B) {
		bp := procs.get(b)
		run++
		tasks := make([]api.TaskSubmit, b.N)
		for i := range tasks {
			tasks[i] = deliverybench.Task(dest.CallbackURL(), fmt.Sprintf("pd%d-%d", run, i), true)
		}
		before := dest.Count("")
		cpu0 := clusterCPU(b, bp.c)
		profiled := profileProcs(b, bp.c, b.N)
		b.ResetTimer()
		start := time.Now()
		ids := deliverybench.SubmitAll(b, bp.clients, tasks)
		bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before })
		took := time.Since(start)
		b.StopTimer()
		profiled()
		b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
		b.ReportMetric(float64(dest.Count("")-before)/float64(b.N), "calls/task")
		b.ReportMetric(float64((clusterCPU(b, bp.c)-cpu0).Microseconds())/float64(b.N), "node-cpu-us/task")
	})
	b.Run("raw_http", func(b *testing.B) {
		deliverybench.RawHTTP(b, dest.CallbackURL(), 3*pbConcurrency)
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
	dest := transporttest.NewDestination(b)
	procs := &lazyProcs{parent: b}
	run := 0
	b.Run("rate=1000", func(b *testing.B) {
		bp := procs.get(b)
		run++
		before := dest.Count("")
		deliverybench.Latency(b, bp.clients, dest, rate, fmt.Sprintf("pl%d", run), true,
			func(ids []string) { bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before }) })
	})
}

// BenchmarkProcessDeliveryBesideDead is a healthy destination's delivery
// throughput while another destination, fed the same number of tasks in
// the same batches, refuses every connection (other_dead), beside the same
// load with both healthy (both_healthy). tasks/s counts the healthy
// destination's tasks from the first submit until the last succeeded.
func BenchmarkProcessDeliveryBesideDead(b *testing.B) {
	run := 0
	for _, mode := range []string{"both_healthy", "other_dead"} {
		// A fresh cluster per mode: throughput falls as a cluster retains
		// tasks, so a shared one would favour whichever mode runs first.
		procs := &lazyProcs{parent: b}
		healthy, other := transporttest.NewDestination(b), transporttest.NewDestination(b)
		if mode == "other_dead" {
			if err := other.SetMode(transporttest.ModeRefuse); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(mode, func(b *testing.B) {
			bp := procs.get(b)
			run++
			before := healthy.Count("")
			deliverybench.BesideDead(b, bp.clients, healthy, other, fmt.Sprintf("pbd%d", run), true,
				func(ids []string) { bp.waitSucceeded(b, ids, func() int { return healthy.Count("") - before }) })
		})
		if procs.bp != nil {
			procs.bp.c.StopAll(b) // the next mode starts on a fresh cluster, alone
		}
	}
}

// benchClient is a node's client for benchmarks: api.NewClient's
// pooled transport for a plain node, the same pool settings over TLS (the
// harness's CA and client certificate) and the node's token for a secure
// one, so the two modes differ only by what security costs.
func benchClient(p *Process) *api.Client {
	if p.cfg.TLS == nil {
		return api.NewClient(p.HTTPAddr(), p.cfg.AdminToken, nil)
	}
	tr := &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ForceAttemptHTTP2: true, TLSClientConfig: p.cfg.TLS.Client,
	}
	return api.NewClient("https://"+p.HTTPAddr(), p.cfg.AdminToken, &http.Client{Timeout: 30 * time.Second, Transport: tr})
}

// BenchmarkProcessSecurity is what security costs (issue 15): durable
// delivery (b.N callbacks in batches of 500) and enqueue → delivered at
// 1,000 tasks/s on three processes with TLS (HTTPS API, mutual-TLS Raft
// and leader forwarding), encrypted gossip and named tokens — secure —
// beside the same workloads on a plain cluster in the same run. Each mode
// runs on a fresh cluster of its own, stopped before the next starts.
func BenchmarkProcessSecurity(b *testing.B) {
	for _, mode := range []string{"plain", "secure"} {
		procs := &lazyProcs{parent: b}
		if mode == "secure" {
			procs.opts = secureClusterOptions(b)
		}
		dest := transporttest.NewDestination(b)
		run := 0
		b.Run(mode+"/delivery", func(b *testing.B) {
			bp := procs.get(b)
			run++
			tasks := make([]api.TaskSubmit, b.N)
			for i := range tasks {
				tasks[i] = deliverybench.Task(dest.CallbackURL(), fmt.Sprintf("ps%s%d-%d", mode, run, i), true)
			}
			before := dest.Count("")
			b.ResetTimer()
			start := time.Now()
			ids := deliverybench.SubmitAll(b, bp.clients, tasks)
			bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before })
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
		})
		b.Run(mode+"/latency", func(b *testing.B) {
			bp := procs.get(b)
			run++
			before := dest.Count("")
			deliverybench.Latency(b, bp.clients, dest, 1000, fmt.Sprintf("psl%s%d", mode, run), true,
				func(ids []string) { bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before }) })
		})
		if procs.bp != nil {
			procs.bp.c.StopAll(b)
		}
	}
}
