package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/deliverybench"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// nodesBlock is one turn's tasks in BenchmarkProcessPostgresNodesInterleaved:
// a few seconds of delivery, so the pipeline fills and drains once per turn
// (as in BenchmarkProcessPostgresNodes, whose run is 20,000).
const nodesBlock = 20000

// BenchmarkProcessPostgresNodesInterleaved holds BenchmarkProcessPostgresNodes'
// figures (throughput must not fall as nodes are added) the way
// BenchmarkDeliveryInterleaved holds the cluster against raw HTTP. Clusters of
// one, three and five processes run side by side on one PostgreSQL server,
// each on a database of its own, and take turns in blocks of nodesBlock tasks
// (submitted in batches of 500 through every node's API, waited on until
// delivered and acknowledged): b.N rounds of a turn each, the order rotated
// every round. Each side's rate is its tasks over its blocks' summed
// wall time, so a slow minute of this shared machine costs every side alike;
// run one after the other (BenchmarkProcessPostgresNodes), the 5-against-1
// ratio moved 0.56–1.01 between runs (docs/benchmarks.md).
//
// Every node allows the default calls in flight (100 per destination, as
// Temporal's per-host limiter), so five nodes open five times one node's
// calls and connections, on the two cores the destination shares. A fourth
// side, the five nodes at 20 each (the cluster's calls in flight one default
// node's), came out at 0.76–1.11 of one node over single runs and 0.99 and
// 0.84 as the medians of two benchreport runs: no steady effect, not kept
// (docs/benchmarks.md, "Twenty-second session").
//
// While one cluster takes its turn the others are stopped (SIGSTOP), so none
// pays another's idle cost; after it is continued, its turn starts only once
// every node is ready again and they agree on one shard map. A resumed node
// makes no calls until it has caught up through a read barrier, which it
// takes as soon as its first call finds its freshness check overdue
// (ownership.Manager.Fresh); each turn's time includes that round trip, every
// side's alike. A first round, not counted, warms every side: every node's
// heap grows to the collector's floor (--gc-heap-floor-mb), its connections
// are dialled and its statements prepared. Those costs are paid once per
// process, and on a run of 20,000 tasks five processes pay them five times:
// BenchmarkProcessPostgresNodes counts 3.9 page faults per task at five nodes
// against 1.0 at one.
//
// Metrics: ratio (five nodes over one), ratio-3v1, ratio-5v3, and each
// side's tasks/s, fusebox CPU per task (user + system, from /proc; its system
// part and minor page faults per task also apart), the fusebox threads'
// timeslices per task (slices/task: how often a thread was put on a CPU,
// about its context switches) and their time runnable but waiting for a CPU
// (runq-us/task), database server CPU per task, and cores: the CPU of the
// nodes, the server and this process (load and destination) over the side's
// wall time, which says whether a side kept the box's two cores busy.
//
// FUSEBOX_BENCH_TURNS=1 writes each turn's wall time and CPU per task to
// stderr, and with FUSEBOX_PGTEST_STATS=1 the turn's statements: a side
// whose turns all cost more than its neighbours' is a plan or a process of
// its own, not the machine (how the twenty-fourth session found the result
// writes' generic plans, taskstore/pgstore/plans.go). The turn's line
// also says when the last call reached the destination and has this
// process's CPU per task (the load and the destination), and
// FUSEBOX_BENCH_OWNPROF=dir writes a CPU profile of this process per turn
// (how the twenty-fifth session found the destination's kept calls costing
// one side's turns more than another's: transporttest.Destination.CountOnly).
func BenchmarkProcessPostgresNodesInterleaved(b *testing.B) {
	dest := transporttest.NewDestination(b)
	dest.CountOnly() // a receiver that answers and forgets (transporttest.Destination.CountOnly)
	sizes := [3]int{1, 3, 5}
	var clusters [3]*benchProcs
	var srv *pgtest.Server
	owner := &cleanups{TB: b}
	defer owner.run()
	run := 0 // across every b.N: each block's request ids are its own
	warmed := false
	b.Run("nodes=1-3-5", func(b *testing.B) {
		if srv == nil { // kept for every b.N of this sub-benchmark
			srv = startPGServer(b, owner)
			for i, n := range sizes {
				db := fmt.Sprintf("nodes%d", n)
				if err := srv.Exec("CREATE DATABASE " + db); err != nil {
					b.Fatal(err)
				}
				opts := pgOptions(srv.URL(db))
				opts.Timing = os.Getenv("FUSEBOX_BENCH_TIMING")
				clusters[i] = startBenchProcs(b, owner, n, opts)
				pauseCluster(b, clusters[i].c)
			}
		}
		// Each side's sums over its blocks: wall time, the nodes' /proc
		// counters, the database server's CPU and this process's.
		type totals struct {
			wall, db, own time.Duration
			nodes         procStat
		}
		var sum [len(sizes)]totals
		last := false // profile the last round's blocks (FUSEBOX_BENCH_PPROF, profileProcs)
		turn := func(i int) {
			run++
			bp := clusters[i]
			resumeCluster(b, bp.c)
			resetStatements(b, srv) // FUSEBOX_PGTEST_STATS: each turn's statements apart
			tasks := make([]api.TaskSubmit, nodesBlock)
			for j := range tasks {
				tasks[j] = deliverybench.Task(dest.CallbackURL(), fmt.Sprintf("pi%d-%d", run, j), true)
			}
			before := dest.Count("")
			st0, db0, own0 := clusterStat(b, bp.c), pgtest.CPUOf(b, srv), deliverybench.CPUClock()
			profiled := func() {}
			if last {
				profiled = profileProcsAs(b, bp.c, b.N, fmt.Sprintf("%s-nodes%d", b.Name(), sizes[i]))
			}
			ownProfiled := profileOwn(b, fmt.Sprintf("%s-nodes%d", b.Name(), sizes[i]))
			start := time.Now()
			ids := deliverybench.SubmitAll(b, bp.clients, tasks)
			var allArrived time.Duration // when the last call reached the destination (polled)
			bp.waitSucceeded(b, ids, func() int {
				n := dest.Count("") - before
				if n >= len(ids) && allArrived == 0 {
					allArrived = time.Since(start)
				}
				return n
			})
			wall, nodes, db := time.Since(start), clusterStat(b, bp.c).minus(st0), pgtest.CPUOf(b, srv)-db0
			t := &sum[i]
			t.wall += wall
			t.nodes = t.nodes.plus(nodes)
			t.db += db
			own := deliverybench.CPUClock() - own0
			ownProfiled()
			t.own += own
			if os.Getenv("FUSEBOX_BENCH_TURNS") != "" {
				fmt.Fprintf(os.Stderr, "turn %d, %d nodes: %v (every call made by %v), database %.0f µs/task, nodes %.0f µs/task (%.2f timeslices, %.1f µs waiting for a CPU), load and destination %.0f µs/task\n", run, sizes[i],
					wall.Round(time.Millisecond), allArrived.Round(time.Millisecond), db.Seconds()*1e6/nodesBlock, nodes.cpu().Seconds()*1e6/nodesBlock,
					float64(nodes.slices)/nodesBlock, float64(nodes.waitNs)/1e3/nodesBlock, own.Seconds()*1e6/nodesBlock)
				logStatements(b, srv, nodesBlock)
			}
			profiled() // before the pause: its answer comes from the running processes
			pauseCluster(b, bp.c)
		}
		if !warmed { // warm every side up once, uncounted
			for i := range sizes {
				turn(i)
			}
			warmed = true
		}
		sum = [len(sizes)]totals{}
		b.ResetTimer()
		for r := range b.N {
			last = r == b.N-1
			for k := range sizes {
				turn((r + k) % len(sizes))
			}
		}
		b.StopTimer()
		n := float64(b.N * nodesBlock)
		b.ReportMetric(sum[0].wall.Seconds()/sum[2].wall.Seconds(), "ratio")
		b.ReportMetric(sum[0].wall.Seconds()/sum[1].wall.Seconds(), "ratio-3v1")
		b.ReportMetric(sum[1].wall.Seconds()/sum[2].wall.Seconds(), "ratio-5v3")
		for i, size := range sizes {
			t, name := sum[i], fmt.Sprintf("nodes%d", size)
			cpu := t.nodes.cpu()
			b.ReportMetric(n/t.wall.Seconds(), name+"-tasks/s")
			b.ReportMetric(cpu.Seconds()*1e6/n, name+"-cpu-us/task")
			b.ReportMetric(ticks(t.nodes.stime).Seconds()*1e6/n, name+"-sys-us/task")
			b.ReportMetric(float64(t.nodes.minflt)/n, name+"-faults/task")
			b.ReportMetric(float64(t.nodes.slices)/n, name+"-slices/task")
			b.ReportMetric(float64(t.nodes.waitNs)/1e3/n, name+"-runq-us/task")
			b.ReportMetric(t.db.Seconds()*1e6/n, name+"-db-cpu-us/task")
			b.ReportMetric((cpu+t.db+t.own).Seconds()/t.wall.Seconds(), name+"-cores")
		}
	})
}

// pauseCluster stops every process of c (SIGSTOP), waiting until each has.
func pauseCluster(b *testing.B, c *Cluster) {
	b.Helper()
	for _, p := range c.Procs {
		if err := p.Pause(); err != nil {
			b.Fatal(err)
		}
	}
}

// resumeCluster continues every process of c and waits until each is
// ready and they agree on one shard map, every shard owned.
func resumeCluster(b *testing.B, c *Cluster) {
	b.Helper()
	for _, p := range c.Procs {
		if err := p.Resume(); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range c.Procs {
		if err := p.WaitReady(ctx); err != nil {
			b.Fatalf("%s after SIGCONT: %v", p.Name(), err)
		}
	}
	testwait.ForErr(b, time.Minute, "one shard map, every shard owned, after SIGCONT", c.sameShardMap)
}

// profileOwn starts a CPU profile of this process (the load and the
// destination) when FUSEBOX_BENCH_OWNPROF names a directory, one file per
// turn named after the side (pprof merges a side's files when given all of
// them); the returned func stops it.
func profileOwn(b *testing.B, name string) func() {
	dir := os.Getenv("FUSEBOX_BENCH_OWNPROF")
	if dir == "" {
		return func() {}
	}
	f, err := os.CreateTemp(dir, strings.ReplaceAll(name, "/", "_")+"-own-*.pprof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
