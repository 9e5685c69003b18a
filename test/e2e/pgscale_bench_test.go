package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// Issue 18's scaling figures on real processes: `fusebox serve --task-store
// postgres` nodes sharing one durable throwaway PostgreSQL server (fsync
// and synchronous commit on), all on this machine. docs/benchmarks.md and
// docs/scaling.md show them.

// startPGServer is pgServer for a benchmark: a fresh durable server,
// stopped in owner's cleanup.
func startPGServer(b *testing.B, owner testing.TB) *pgtest.Server {
	b.Helper()
	if _, err := pgtest.BinDir(); err != nil {
		b.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pgtest.StartWith(ctx, pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	owner.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// startBenchProcs starts n processes with opts (log level warn), waits for
// an agreed shard map, lifts the per-host rate limit and widens the group
// buffer (as lazyProcs does for three), and stops them in owner's cleanup
// (which runs before a server's registered earlier).
func startBenchProcs(b *testing.B, owner testing.TB, n int, opts ClusterOptions) *benchProcs {
	b.Helper()
	opts.LogLevel = "warn"
	if os.Getenv("FUSEBOX_BENCH_PPROF") != "" { // profileProcs reads /debug/pprof
		opts.ExtraArgs = append(slices.Clone(opts.ExtraArgs), "--enable-pprof")
	}
	if a := os.Getenv("FUSEBOX_BENCH_ARGS"); a != "" { // experiments: more flags for every node, e.g. --gc-heap-floor-mb 32
		opts.ExtraArgs = append(slices.Clone(opts.ExtraArgs), strings.Fields(a)...)
	}
	c := NewCluster(owner, n, opts)
	owner.Cleanup(func() { c.StopAll(owner) })
	bp := &benchProcs{c: c}
	for _, p := range c.Procs {
		bp.clients = append(bp.clients, benchClient(p))
	}
	testwait.ForErr(b, time.Minute, "one shard map, every shard owned and worked on", c.sameShardMap)
	bp.setConfig(b, dynconfig.KeyHostSchedulerMaxTaskRPS, "1000000")
	bp.setConfig(b, dynconfig.KeyGroupLimiterBufferSize, "1000")
	return bp
}

// BenchmarkProcessPostgresNodes is durable delivery (b.N callback tasks in
// batches of 500 through every node's API, delivered and acknowledged in
// the database) with 1, 3 and 5 fusebox processes on one PostgreSQL. Each
// node count runs on a fresh server and cluster, stopped before the next
// starts. Issue 18: throughput must not fall as nodes are added (the
// ratios are against nodes=1 of the same run). On this 2-core machine the
// nodes, the database and the load generator share the two cores, so the
// curve shows the coordination cost of more nodes, not added capacity:
// node-cpu-us/task is the fusebox processes' CPU (user + system, from
// /proc) per task, node-cpu-cores the same over the run's wall time.
// node-idle-cores is the same cluster's CPU while idle, measured for 2 s
// just before the load, and node-work-cpu-us/task the CPU per task beyond
// that idle cost over the run's time: whether the work per task grows with
// the node count, or only the fixed cost of more processes. node-faults/task
// and node-sys-us/task are the processes' minor page faults and system CPU
// per task: a fresh process's heap grows to the collector's floor
// (--gc-heap-floor-mb) in its first tens of thousands of tasks, and on one
// run five fresh processes pay that five times
// (BenchmarkProcessPostgresNodesInterleaved compares warm clusters).
func BenchmarkProcessPostgresNodes(b *testing.B) {
	dest := transporttest.NewDestination(b)
	dest.CountOnly() // a receiver that answers and forgets (transporttest.Destination.CountOnly)
	run := 0
	for _, n := range []int{1, 3, 5} {
		var bp *benchProcs
		var srv *pgtest.Server
		stop := func() {}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			if bp == nil { // kept for every b.N of this sub-benchmark
				owner := &cleanups{TB: b}
				stop = owner.run
				srv = startPGServer(b, owner)
				opts := pgOptions(srv.URL("postgres"))
				opts.Timing = os.Getenv("FUSEBOX_BENCH_TIMING")
				bp = startBenchProcs(b, owner, n, opts)
			}
			resetStatements(b, srv)
			run++
			tasks := make([]api.TaskSubmit, b.N)
			for i := range tasks {
				tasks[i] = deliverybench.Task(dest.CallbackURL(), fmt.Sprintf("pn%d-%d", run, i), true)
			}
			before := dest.Count("")
			idleProfiled := func() {}
			if os.Getenv("FUSEBOX_BENCH_PPROF_IDLE") != "" { // profile the idle window instead of the load
				idleProfiled = profileProcs(b, bp.c, b.N)
			}
			idleCores := idleCPU(b, bp.c)
			idleProfiled()
			st0, db0 := clusterStat(b, bp.c), pgtest.CPUOf(b, srv)
			profiled := func() {}
			if os.Getenv("FUSEBOX_BENCH_PPROF_IDLE") == "" {
				profiled = profileProcs(b, bp.c, b.N)
			}
			b.ResetTimer()
			start := time.Now()
			ids := deliverybench.SubmitAll(b, bp.clients, tasks)
			bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before })
			took := time.Since(start)
			b.StopTimer()
			profiled()
			st, db := clusterStat(b, bp.c).minus(st0), pgtest.CPUOf(b, srv)-db0
			cpu := st.cpu()
			b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
			b.ReportMetric(db.Seconds()*1e6/float64(b.N), "db-cpu-us/task")
			b.ReportMetric(float64(dest.Count("")-before)/float64(b.N), "calls/task")
			b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "node-cpu-us/task")
			b.ReportMetric(cpu.Seconds()/took.Seconds(), "node-cpu-cores")
			b.ReportMetric(float64(st.minflt)/float64(b.N), "node-faults/task")
			b.ReportMetric(ticks(st.stime).Seconds()*1e6/float64(b.N), "node-sys-us/task")
			if b.N > 1 {
				b.ReportMetric(idleCores, "node-idle-cores")
				work := cpu.Seconds() - idleCores*took.Seconds()
				b.ReportMetric(work*1e6/float64(b.N), "node-work-cpu-us/task")
			}
			logStatements(b, srv, b.N)
		})
		stop() // the next node count runs alone
	}
}

// BenchmarkProcessPostgresIdle is what idle nodes cost: 5 fusebox processes
// on one PostgreSQL with no task, measured over b.N × 10 ms of wall time
// after the cluster settled (-benchtime 1000x: 10 s). node-cpu-cores is the
// five processes' CPU over that time, db-cpu-cores the database's; the raft
// store's five idle processes are measured beside them in the same run.
// With FUSEBOX_BENCH_PPROF set, every process is profiled over the window
// (FUSEBOX_BENCH_PPROF_SECONDS: set it to the window's length).
func BenchmarkProcessPostgresIdle(b *testing.B) {
	for _, store := range []string{"raft", "postgres"} {
		var bp *benchProcs
		var srv *pgtest.Server
		stop := func() {}
		b.Run("store="+store+"/nodes=5", func(b *testing.B) {
			if bp == nil { // kept for every b.N of this sub-benchmark
				owner := &cleanups{TB: b}
				stop = owner.run
				var opts ClusterOptions
				if store == "postgres" {
					srv = startPGServer(b, owner)
					opts = pgOptions(srv.URL("postgres"))
				}
				opts.Timing = os.Getenv("FUSEBOX_BENCH_TIMING")
				bp = startBenchProcs(b, owner, 5, opts)
			}
			profiled := profileProcs(b, bp.c, b.N)
			idx0 := appliedIndex(b, bp.c)
			cpu0, db0 := clusterCPU(b, bp.c), pgtest.CPUOf(b, srv)
			start := time.Now()
			time.Sleep(time.Duration(b.N) * 10 * time.Millisecond) // the measurement: idle wall time
			took := time.Since(start)
			profiled()
			b.ReportMetric(float64(appliedIndex(b, bp.c)-idx0)/took.Seconds(), "raft-entries/s")
			b.ReportMetric((clusterCPU(b, bp.c)-cpu0).Seconds()/took.Seconds(), "node-cpu-cores")
			b.ReportMetric((pgtest.CPUOf(b, srv)-db0).Seconds()/took.Seconds(), "db-cpu-cores")
		})
		stop() // the next store runs alone
	}
}

// BenchmarkProcessPostgresLatency paces single submits (POST /v1/tasks,
// spread over three processes) at 1,000 tasks/s and reports enqueue →
// delivered (p50-ms, p99-ms) on the postgres store, beside the Raft store
// in the same run. Issue 18's target: p99 ≤ 50 ms on postgres.
func BenchmarkProcessPostgresLatency(b *testing.B) {
	const rate = 1000
	dest := transporttest.NewDestination(b)
	run := 0
	for _, store := range []string{"raft", "postgres"} {
		var bp *benchProcs
		var srv *pgtest.Server
		stop := func() {}
		b.Run("store="+store+"/rate=1000", func(b *testing.B) {
			if bp == nil {
				owner := &cleanups{TB: b}
				stop = owner.run
				var opts ClusterOptions
				if store == "postgres" {
					srv = startPGServer(b, owner)
					opts = pgOptions(srv.URL("postgres"))
				}
				bp = startBenchProcs(b, owner, 3, opts)
			}
			resetStatements(b, srv)
			defer logStatements(b, srv, b.N)
			run++
			before := dest.Count("")
			deliverybench.Latency(b, bp.clients, dest, rate, fmt.Sprintf("pgl%d", run), true,
				func(ids []string) { bp.waitSucceeded(b, ids, func() int { return dest.Count("") - before }) })
		})
		stop()
	}
}

// BenchmarkProcessPendingRSS is each node's resident memory (VmRSS from
// /proc/<pid>/status) with a backlog of pending tasks: three processes, a
// destination refusing every connection (the tasks stay pending, retried
// and blocked by the open breaker as in a real outage), the backlog limits
// lifted. postgres holds b.N tasks (-benchtime 1000000x: 1M); raft holds
// b.N/5 — its RSS grows with every task on every node, so it is measured
// smaller and extrapolated per task, as the figures say. Metrics: rss-MB
// (the largest node's RSS once submitted, after a settle), hwm-MB (its
// peak, VmHWM), rss-B/task ((RSS after − before) / tasks) and rss-MB@1M
// (before + 1M × that: the extrapolation, equal to the measurement at 1M),
// and submit tasks/s.
func BenchmarkProcessPendingRSS(b *testing.B) {
	for _, store := range []string{"raft", "postgres"} {
		b.Run("store="+store, func(b *testing.B) {
			if b.N == 1 {
				return // the framework's first probe run: nothing to measure
			}
			owner := &cleanups{TB: b}
			defer owner.run()
			count := b.N
			var opts ClusterOptions
			if store == "postgres" {
				opts = pgOptions(startPGServer(b, owner).URL("postgres"))
			} else {
				count = b.N / 5
			}
			bp := startBenchProcs(b, owner, 3, opts)
			bp.setConfig(b, dynconfig.KeyTaskMaxDestinationBacklog, "0")
			bp.setConfig(b, dynconfig.KeyTaskMaxPendingTasks, "0")
			dead := transporttest.NewDestination(b)
			if err := dead.SetMode(transporttest.ModeRefuse); err != nil {
				b.Fatal(err)
			}
			rss0 := maxRSS(b, bp.c, "VmRSS")
			tasks := make([]api.TaskSubmit, count)
			for i := range tasks {
				tasks[i] = deliverybench.Task(dead.CallbackURL(), "rss-"+strconv.Itoa(i), false)
			}
			b.ResetTimer()
			start := time.Now()
			deliverybench.SubmitAll(b, bp.clients, tasks)
			took := time.Since(start)
			b.StopTimer()
			time.Sleep(10 * time.Second) // settle: readers page, retries and breaker blocks run (a dwell, not a wait for a state)
			rss, hwm := maxRSS(b, bp.c, "VmRSS"), maxRSS(b, bp.c, "VmHWM")
			perTask := float64(rss-rss0) / float64(count)
			b.ReportMetric(float64(rss)/(1<<20), "rss-MB")
			b.ReportMetric(float64(hwm)/(1<<20), "hwm-MB")
			b.ReportMetric(perTask, "rss-B/task")
			b.ReportMetric((float64(rss0)+perTask*1e6)/(1<<20), "rss-MB@1M")
			b.ReportMetric(float64(count)/took.Seconds(), "submit-tasks/s")
			b.Logf("%s: %d pending tasks on 3 nodes; largest node RSS %d MB before, %d MB after (peak %d MB); submitted in %v",
				store, count, rss0>>20, rss>>20, hwm>>20, took.Round(time.Millisecond))
		})
	}
}

// resetStatements clears the server's statement statistics before a
// measurement (FUSEBOX_PGTEST_STATS=1; pgtest/stats.go); srv nil: none.
func resetStatements(b *testing.B, srv *pgtest.Server) {
	b.Helper()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.ResetStatements(ctx); err != nil {
		b.Fatal(err)
	}
}

// logStatements logs the statements the database ran since
// resetStatements, per task (FUSEBOX_PGTEST_STATS=1).
func logStatements(b *testing.B, srv *pgtest.Server, tasks int) {
	b.Helper()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := srv.StatementsReport(ctx, tasks)
	if err != nil {
		b.Fatal(err)
	}
	if r != "" && tasks > 1 { // on stderr: a benchmark's log is cut at 10 lines
		fmt.Fprintf(os.Stderr, "%s: statements, %d tasks:\n%s", b.Name(), tasks, r)
	}
}

// profileProcs takes a CPU profile of every process while the benchmark
// runs when FUSEBOX_BENCH_PPROF names a directory (the processes then run
// with --enable-pprof): FUSEBOX_BENCH_PPROF_SECONDS (default 3) from the
// call, written to <dir>/<benchmark>-<process>.pprof by the func it returns,
// which waits for them (FUSEBOX_BENCH_PPROF_IDLE=1: of the idle window
// before the load instead). For finding where the CPU goes, not a figure.
func profileProcs(b *testing.B, c *Cluster, n int) func() {
	return profileProcsAs(b, c, n, b.Name())
}

// profileProcsAs is profileProcs with the files named <dir>/<name>-<process>.pprof.
func profileProcsAs(b *testing.B, c *Cluster, n int, name string) func() {
	dir := os.Getenv("FUSEBOX_BENCH_PPROF")
	if dir == "" || n <= 1 {
		return func() {}
	}
	secs := os.Getenv("FUSEBOX_BENCH_PPROF_SECONDS")
	if secs == "" {
		secs = "3"
	}
	errs := make(chan error, len(c.Procs))
	for _, p := range c.Procs {
		file := filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+"-"+p.Name()+".pprof")
		go func() {
			req, err := http.NewRequest(http.MethodGet, "http://"+p.HTTPAddr()+"/debug/pprof/profile?seconds="+secs, nil)
			if err != nil {
				errs <- err
				return
			}
			if p.cfg.AdminToken != "" {
				req.Header.Set("Authorization", "Bearer "+p.cfg.AdminToken)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s", p.Name(), resp.Status)
			}
			if err == nil {
				err = os.WriteFile(file, body, 0o600)
			}
			errs <- err
		}()
	}
	return func() {
		for range c.Procs {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
}

// idleCPU is the cluster's CPU in cores over idleWindow of no load (b.N
// > 1; 0 for the framework's first probe run).
func idleCPU(b *testing.B, c *Cluster) float64 {
	b.Helper()
	if b.N <= 1 {
		return 0
	}
	const idleWindow = 2 * time.Second
	cpu0 := clusterCPU(b, c)
	start := time.Now()
	time.Sleep(idleWindow) // the measurement: idle wall time, as BenchmarkProcessPostgresIdle
	return (clusterCPU(b, c) - cpu0).Seconds() / time.Since(start).Seconds()
}

// procStat is one sample of the cluster's processes' /proc/<pid>/stat
// counters, summed over the processes, and of their threads'
// /proc/<pid>/task/<tid>/schedstat, summed over every thread.
type procStat struct {
	minflt       int64 // minor page faults
	utime, stime int64 // clock ticks (USER_HZ) in user and system mode
	// slices is the times a thread was put on a CPU (about its context
	// switches), waitNs the time threads were runnable but waiting for a
	// CPU: what sharing the two cores with the other processes cost. A
	// thread that exits takes its counts with it; a Go runtime's threads
	// live as long as the process.
	slices, waitNs int64
}

// clusterStat reads c's processes' counters from /proc/<pid>/stat and
// their threads' from /proc/<pid>/task/<tid>/schedstat (zero on a kernel
// without scheduler statistics).
func clusterStat(b *testing.B, c *Cluster) procStat {
	b.Helper()
	var st procStat
	for _, p := range c.Procs {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
		if err != nil {
			b.Fatalf("%s: %v", p.Name(), err)
		}
		// Fields after the command's closing parenthesis: state is the 3rd
		// of the whole line, minflt the 10th, utime the 14th, stime the 15th.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		for _, x := range []struct {
			i   int
			sum *int64
		}{{7, &st.minflt}, {11, &st.utime}, {12, &st.stime}} {
			v, err := strconv.ParseInt(f[x.i], 10, 64)
			if err != nil {
				b.Fatalf("%s: /proc stat field %d: %v", p.Name(), x.i+3, err)
			}
			*x.sum += v
		}
		slices, waitNs, err := schedStat(p.Pid())
		if err != nil {
			b.Fatalf("%s: %v", p.Name(), err)
		}
		st.slices += slices
		st.waitNs += waitNs
	}
	return st
}

// schedStat sums pid's threads' /proc/<pid>/task/<tid>/schedstat (time on
// a CPU, time waiting for one, and timeslices): the timeslices and the
// wait in nanoseconds. A thread gone between the listing and the read is
// skipped.
func schedStat(pid int) (slices, waitNs int64, err error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		f := strings.Fields(string(raw))
		if len(f) != 3 {
			return 0, 0, fmt.Errorf("/proc/%d/task/%s/schedstat: %q", pid, t.Name(), raw)
		}
		w, err1 := strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.ParseInt(f[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/task/%s/schedstat: %w", pid, t.Name(), err)
		}
		waitNs += w
		slices += n
	}
	return slices, waitNs, nil
}

// minus is the counters' growth since an earlier sample.
func (s procStat) minus(o procStat) procStat {
	return procStat{minflt: s.minflt - o.minflt, utime: s.utime - o.utime, stime: s.stime - o.stime,
		slices: s.slices - o.slices, waitNs: s.waitNs - o.waitNs}
}

// plus adds two samples' (or two growths') counters.
func (s procStat) plus(o procStat) procStat {
	return procStat{minflt: s.minflt + o.minflt, utime: s.utime + o.utime, stime: s.stime + o.stime,
		slices: s.slices + o.slices, waitNs: s.waitNs + o.waitNs}
}

// cpu is the user and system time the counters hold.
func (s procStat) cpu() time.Duration { return ticks(s.utime + s.stime) }

// ticks is a count of USER_HZ clock ticks as a duration.
func ticks(n int64) time.Duration { return time.Duration(n) * time.Second / 100 }

// clusterCPU is the CPU time (user + system) the cluster's processes
// have used, from /proc/<pid>/stat (the database's is not included).
func clusterCPU(b *testing.B, c *Cluster) time.Duration {
	b.Helper()
	return clusterStat(b, c).cpu()
}

// maxRSS is the largest of the cluster's processes' field (VmRSS, VmHWM)
// in bytes.
func maxRSS(b *testing.B, c *Cluster, field string) int64 {
	b.Helper()
	var most int64
	for _, p := range c.Procs {
		v, err := procStatusBytes(p.Pid(), field)
		if err != nil {
			b.Fatalf("%s: %v", p.Name(), err)
		}
		most = max(most, v)
	}
	return most
}

// procStatusBytes reads a "kB" field of /proc/<pid>/status.
func procStatusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// cleanups is a testing.TB whose Cleanup functions run when run is called
// (last registered first), so a sub-benchmark's cluster and server can be
// stopped before the next sub-benchmark starts while being kept across
// the b.N calls of its own.
type cleanups struct {
	testing.TB
	fns []func()
}

func (c *cleanups) Cleanup(f func()) { c.fns = append(c.fns, f) }

func (c *cleanups) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// appliedIndex is the highest Raft index any of c's processes applied
// (fusebox_raft_applied_index): whether anything writes to Raft while idle.
func appliedIndex(b *testing.B, c *Cluster) float64 {
	b.Helper()
	var hi float64
	for _, p := range c.Procs {
		m, err := scrapeMetrics(p)
		if err != nil {
			b.Fatal(err)
		}
		hi = max(hi, metricSum(m, "fusebox_raft_applied_index"))
	}
	return hi
}
