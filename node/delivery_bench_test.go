package node

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Delivery benchmarks (issue "The outbound task queue" §9). Each starts a
// 3-node loopback cluster (real Raft with fsync, real gossip, fast timing),
// submits tasks through the HTTP API and delivers them to a transporttest
// callback receiver on loopback. One op is one task; run with a fixed
// count, e.g. -benchtime=20000x. Every figure is reported with
// b.ReportMetric for tools/benchreport.

// benchConcurrency is the per-host group concurrency (dynconfig default);
// with 3 nodes up to 3× this many calls are in flight, which is the
// raw-HTTP baseline's concurrency.
const benchConcurrency = dynconfig.DefaultGroupLimiterConcurrency

// benchCluster is a 3-node cluster for benchmarks.
type benchCluster struct {
	nodes   []*Node
	clients []*api.Client
}

// startBenchCluster starts 3 nodes with shards shards, waits until they are
// ready with a settled shard map, and lifts the per-destination rate limit
// (dynconfig's default, 100 calls/s per group per host, would be the
// figure otherwise). Failures are reported on tb; the cluster lives in
// owner's temp dir and is closed in owner's cleanup.
func startBenchCluster(tb, owner testing.TB, shards int) *benchCluster {
	return startBenchClusterTiming(tb, owner, shards, "fast")
}

// startBenchClusterTiming is startBenchCluster with a timing preset.
func startBenchClusterTiming(tb, owner testing.TB, shards int, timing string) *benchCluster {
	return startBenchClusterWith(tb, owner, shards, timing, nil)
}

// startBenchClusterWith is startBenchClusterTiming with mutate applied to
// every node's config (the postgres task store).
func startBenchClusterWith(tb, owner testing.TB, shards int, timing string, mutate func(*Config)) *benchCluster {
	tb.Helper()
	dir := owner.TempDir()
	bc := &benchCluster{}
	owner.Cleanup(func() {
		for _, n := range bc.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_ = n.Close(ctx)
			cancel()
		}
	})
	var join []string
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		cfg := Config{NodeID: id, DataDir: filepath.Join(dir, id), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
			Join: join, BootstrapExpect: 3, Shards: shards, Timing: timing, Version: "bench"}
		if mutate != nil {
			mutate(&cfg)
		}
		n, err := New(cfg, testLogger(nil))
		if err != nil {
			tb.Fatal(err)
		}
		bc.nodes = append(bc.nodes, n)
		if err := n.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
		bc.clients = append(bc.clients, api.NewClient(n.HTTPAddr(), "", nil))
		join = append(join, n.GossipAddr())
	}
	testwait.For(tb, 60*time.Second, "cluster ready with settled shards", func() bool {
		for _, n := range bc.nodes {
			if ok, _ := n.ready(); !ok {
				return false
			}
		}
		return shardsSettled(tb, bc.nodes)
	})
	bc.setConfig(tb, dynconfig.KeyHostSchedulerMaxTaskRPS, "", "1000000")
	bc.setConfig(tb, dynconfig.KeyGroupLimiterBufferSize, "", "1000")
	return bc
}

// setConfig writes a global (or per-destination) value and waits until
// every node applied it and shows it in its live config.
func (bc *benchCluster) setConfig(tb testing.TB, key, destination, value string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := bc.clients[0].ConfigSet(ctx, key, api.ConfigWrite{Destination: destination, Value: []byte(value)})
	if err != nil {
		tb.Fatalf("config %s: %v", key, err)
	}
	for _, n := range bc.nodes {
		if err := n.store.WaitForApplied(ctx, res.Index); err != nil {
			tb.Fatal(err)
		}
		waitConfigSeen(tb, n)
	}
}

// waitSucceeded waits until every task in ids has succeeded in node 0's
// replica. It walks ids in order, so the total work is O(len(ids) + polls).
func (bc *benchCluster) waitSucceeded(tb testing.TB, ids []string) {
	tb.Helper()
	if pg := bc.nodes[0].pg; pg != nil {
		waitSucceededPG(tb, pg, bc.nodes, ids)
		return
	}
	store := bc.nodes[0].store
	next := 0
	testwait.For(tb, deliverybench.Deadline, fmt.Sprintf("%d tasks to succeed", len(ids)), func() bool {
		for next < len(ids) {
			tk, ok := store.Reader().Task(ids[next])
			if !ok || tk.Status != state.TaskSucceeded {
				return false
			}
			next++
		}
		return true
	})
}

// deliverRun submits n callback tasks to url and waits until all succeeded;
// it returns the wall time from the first submit.
func (bc *benchCluster) deliverRun(b *testing.B, run int, n int, url string) time.Duration {
	tasks := make([]api.TaskSubmit, n)
	for i := range tasks {
		tasks[i] = deliverybench.Task(url, fmt.Sprintf("r%d-%d", run, i), false)
	}
	start := time.Now()
	ids := deliverybench.SubmitAll(b, bc.clients, tasks)
	bc.waitSucceeded(b, ids)
	return time.Since(start)
}

// lazyCluster starts one cluster per shard count on first use and keeps it
// for every b.N a sub-benchmark is run with; parent's cleanup closes them.
type lazyCluster struct {
	parent *testing.B
	m      map[int]*benchCluster
}

// close stops every cluster started so far (the parent's cleanup then has
// nothing left to do: Node.Close is idempotent).
func (l *lazyCluster) close() {
	for _, bc := range l.m {
		for _, n := range bc.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_ = n.Close(ctx)
			cancel()
		}
	}
}

func (l *lazyCluster) get(b *testing.B, shards int) *benchCluster {
	if l.m == nil {
		l.m = map[int]*benchCluster{}
	}
	bc, ok := l.m[shards]
	if !ok {
		bc = startBenchCluster(b, l.parent, shards)
		l.m[shards] = bc
	}
	return bc
}

// BenchmarkDelivery is sustained durable delivery: b.N callback tasks
// submitted in batches of 500 through the three nodes' APIs, committed to
// Raft, delivered by the shard owners and acknowledged (succeeded) in Raft.
// Baseline raw_http: the same POSTs from one Go client with the cluster's
// delivery concurrency (3 nodes × group concurrency), no queue.
func BenchmarkDelivery(b *testing.B) {
	dest := transporttest.NewDestination(b)
	dest.CountOnly() // a receiver that answers and forgets (transporttest.Destination.CountOnly)
	clusters := &lazyCluster{parent: b}
	run := 0
	b.Run("cluster", func(b *testing.B) {
		bc := clusters.get(b, DefaultShards)
		run++
		before := dest.Count("")
		b.ResetTimer()
		cpu0 := deliverybench.CPUClock()
		took := bc.deliverRun(b, run, b.N, dest.CallbackURL())
		cpu := deliverybench.CPUClock() - cpu0
		b.StopTimer()
		b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
		b.ReportMetric(cpu.Seconds()/took.Seconds(), "cpu-cores")
		b.ReportMetric(float64(dest.Count("")-before)/float64(b.N), "calls/task")
	})
	b.Run("raw_http", func(b *testing.B) {
		deliverybench.RawHTTP(b, dest.CallbackURL(), 3*benchConcurrency)
	})
}

// BenchmarkDeliveryInterleaved is BenchmarkDelivery's two sides in
// alternating blocks of one run: a block of interleaveBlock tasks the
// cluster delivers durably (submitted in batches of 500, waited on until
// succeeded), then as many raw POSTs, the order swapped every pair, b.N
// pairs. Each side's rate is its calls over its blocks' summed wall time,
// so a minute in which the machine (or its hypervisor) slows down costs
// both sides alike, where BenchmarkDelivery's sub-benchmarks, a few
// seconds apart, can each land in a different minute. Metrics: ratio
// (cluster over raw), cluster-tasks/s, raw-tasks/s, and each side's
// process CPU per task.
func BenchmarkDeliveryInterleaved(b *testing.B) {
	const interleaveBlock = 20000 // BenchmarkDelivery's run: the pipeline fills and drains once per block
	dest := transporttest.NewDestination(b)
	dest.CountOnly() // a receiver that answers and forgets (transporttest.Destination.CountOnly)
	bc := startBenchCluster(b, b, DefaultShards)
	client := transport.NewHTTPClient()
	defer client.CloseIdleConnections()
	var wall, cpu [2]time.Duration // 0 cluster, 1 raw
	run := 0
	side := func(s int) {
		run++
		c0 := deliverybench.CPUClock()
		if s == 0 {
			wall[0] += bc.deliverRun(b, run, interleaveBlock, dest.CallbackURL())
		} else {
			wall[1] += deliverybench.RawCalls(b, client, dest.CallbackURL(), 3*benchConcurrency, fmt.Sprintf("raw%d-", run), interleaveBlock)
		}
		cpu[s] += deliverybench.CPUClock() - c0
	}
	side(0) // warm both sides up, untimed
	side(1)
	wall, cpu = [2]time.Duration{}, [2]time.Duration{}
	deferred0 := bc.sumMetricWhere(b, "fusebox_queue_task_results_total", "outcome", "deferred")
	recalled0 := bc.sumMetric(b, "fusebox_queue_deferred_recalled_total")
	b.ResetTimer()
	for i := range b.N {
		first := i % 2
		side(first)
		side(1 - first)
	}
	b.StopTimer()
	n := float64(b.N * interleaveBlock)
	b.ReportMetric((bc.sumMetricWhere(b, "fusebox_queue_task_results_total", "outcome", "deferred")-deferred0)/n, "deferred/task")
	b.ReportMetric((bc.sumMetric(b, "fusebox_queue_deferred_recalled_total")-recalled0)/n, "recalled/task")
	b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "ratio")
	b.ReportMetric(n/wall[0].Seconds(), "cluster-tasks/s")
	b.ReportMetric(n/wall[1].Seconds(), "raw-tasks/s")
	b.ReportMetric(float64(cpu[0].Microseconds())/n, "cluster-cpu-us/task")
	b.ReportMetric(float64(cpu[1].Microseconds())/n, "raw-cpu-us/task")
}

// BenchmarkDeliveryLatency paces single submits (POST /v1/tasks, spread
// over the three nodes) at 1,000 tasks/s and reports enqueue → delivered
// latency: from the moment the submit is sent to the task's first arrival
// at the destination (one process, one clock; arrivals keyed by request
// id). accept-p99-ms is the submit call alone (Raft commit); tasks/s is the
// rate actually reached (256 submitters, so the client does not queue
// while Raft keeps up). rate=2000 is past what one-entry-per-submit
// sustained here; it shows the nodes' group commit of single submits.
func BenchmarkDeliveryLatency(b *testing.B) {
	dest := transporttest.NewDestination(b)
	run := 0
	for _, rate := range []int{1000, 2000} {
		clusters := &lazyCluster{parent: b} // a fresh cluster per rate
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			bc := clusters.get(b, DefaultShards)
			run++
			cpu0 := deliverybench.CPUClock()
			deliverybench.Latency(b, bc.clients, dest, rate, fmt.Sprintf("lat%d", run), false,
				func(ids []string) { bc.waitSucceeded(b, ids) })
			// At a fixed rate the CPU per task is the cost the machine's
			// load moves least (the three nodes, the clients and the
			// destination share this process).
			b.ReportMetric(float64((deliverybench.CPUClock()-cpu0).Microseconds())/float64(b.N), "cpu-us/task")
		})
		clusters.close()
	}
}

// BenchmarkDeliveryLatencyQuiet is BenchmarkDeliveryLatency at 10 tasks/s
// on the production timing preset (lan): with few writes, a follower
// learns of a commit only from the leader's next append, so the shards it
// owns see new tasks after up to two raft CommitTimeouts.
func BenchmarkDeliveryLatencyQuiet(b *testing.B) {
	before := goleak.IgnoreCurrent()
	b.Cleanup(func() { awaitStrayGoroutines(before) }) // runs after the cluster's cleanup
	dest := transporttest.NewDestination(b)
	bc := startBenchClusterTiming(b, b, DefaultShards, "lan")
	deliverybench.Latency(b, bc.clients, dest, 10, "quiet", false, func(ids []string) { bc.waitSucceeded(b, ids) })
}

// BenchmarkDeliveryBesideDead is a healthy destination's delivery
// throughput while another destination, fed the same number of tasks in
// the same batches, refuses every connection (other_dead), beside the same
// load with both healthy (both_healthy). tasks/s counts the healthy
// destination's tasks from the first submit until the last succeeded.
func BenchmarkDeliveryBesideDead(b *testing.B) {
	run := 0
	for _, mode := range []string{"both_healthy", "other_dead"} {
		// A fresh cluster per mode: throughput falls as a cluster retains
		// tasks, so a shared one would favour whichever mode runs first.
		clusters := &lazyCluster{parent: b}
		healthy, other := transporttest.NewDestination(b), transporttest.NewDestination(b)
		if mode == "other_dead" {
			if err := other.SetMode(transporttest.ModeRefuse); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(mode, func(b *testing.B) {
			bc := clusters.get(b, DefaultShards)
			run++
			deliverybench.BesideDead(b, bc.clients, healthy, other, fmt.Sprintf("bd%d", run), false,
				func(ids []string) { bc.waitSucceeded(b, ids) })
		})
		clusters.close() // the next mode starts on a fresh cluster, alone
	}
}

// BenchmarkDeliveryShards is BenchmarkDelivery's cluster figure as the
// shard count grows (a cluster per count): the cost of more readers,
// more flushers and smaller completion batches. cpu-us/task is the
// process's CPU per task; writes/task the result writes per task.
func BenchmarkDeliveryShards(b *testing.B) {
	deliveryShards(b, 16, 64, 256)
}

// BenchmarkDeliveryShardsBacklog is BenchmarkDeliveryShards at 16 and 256
// shards, for runs of 100,000 tasks (-benchtime 100000x): a backlog that
// fills the group buffers, so the readers hold tasks and offer them again
// as room frees. Runs of 5,000 tasks did not show what that cost at 256
// shards (queue/held.go). A benchmark of its own so that its figures and
// BenchmarkDeliveryShards' never mix in tools/benchreport.
func BenchmarkDeliveryShardsBacklog(b *testing.B) {
	deliveryShards(b, 16, 256)
}

func deliveryShards(b *testing.B, counts ...int) {
	dest := transporttest.NewDestination(b)
	dest.CountOnly() // a receiver that answers and forgets (transporttest.Destination.CountOnly)
	clusters := &lazyCluster{parent: b}
	run := 0
	for _, shards := range counts {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			bc := clusters.get(b, shards)
			run++
			writes0, entries0 := bc.completionWrites(b), bc.completionEntries(b)
			deferred0 := bc.sumMetricWhere(b, "fusebox_queue_task_results_total", "outcome", "deferred")
			b.ResetTimer()
			cpu0 := deliverybench.CPUClock()
			took := bc.deliverRun(b, run, b.N, dest.CallbackURL())
			cpu := deliverybench.CPUClock() - cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/task")
			b.ReportMetric((bc.completionWrites(b)-writes0)/float64(b.N), "writes/task")
			b.ReportMetric((bc.completionEntries(b)-entries0)/float64(b.N), "entries/task")
			// Tasks written back due later for a saturated key (queue/defer.go):
			// a write each, on a run with a single destination.
			b.ReportMetric((bc.sumMetricWhere(b, "fusebox_queue_task_results_total", "outcome", "deferred")-deferred0)/float64(b.N), "deferred/task")
		})
	}
}

// completionWrites is the result writes (one shard's flush each) the
// cluster's queues have made: what grows with the shard count for the
// same tasks, since a write carries one shard's results.
func (bc *benchCluster) completionWrites(tb testing.TB) float64 {
	return bc.sumMetric(tb, "fusebox_queue_completion_writes_total")
}

// completionEntries is the Raft entries those writes took: the store's
// group commit (raftstore/complete_batch.go) sends the writes in flight on
// a node as one entry.
func (bc *benchCluster) completionEntries(tb testing.TB) float64 {
	return bc.sumMetric(tb, "fusebox_raft_complete_coalesced_shards")
}

// sumMetric sums a counter's values, or a histogram's sample counts, over
// every node's registry.
func (bc *benchCluster) sumMetric(tb testing.TB, name string) float64 {
	return bc.sumMetricWhere(tb, name, "", "")
}

// sumMetricWhere is sumMetric over the series whose label has value (every
// series when label is "").
func (bc *benchCluster) sumMetricWhere(tb testing.TB, name, label, value string) float64 {
	var n float64
	for _, nd := range bc.nodes {
		mfs, err := nd.reg.Gather()
		if err != nil {
			tb.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					if label != "" && !hasLabel(m.GetLabel(), label, value) {
						continue
					}
					n += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return n
}

// hasLabel reports whether labels has name=value.
func hasLabel(labels []*dto.LabelPair, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}
