package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/shardmap"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Fleet rate budget (issue 19 §3). N in-process nodes, one destination
// with fusebox.destination.fleetRPS = fleetBudget and a per-host rate of
// fleetBudget too, fleetBacklog tasks skewed across the nodes' shards (80 %
// on the first node, the rest split evenly: 80/10/10 at N = 3, 80/5/5/5/5
// at N = 5). Baseline: the same fleet with fleetRPS unset, where every node
// sends at its per-host rate.
const (
	fleetBudget  = 200 // calls/s, fleet-wide (and the per-host rate)
	fleetBacklog = 2000
)

// fleetTiming is the benchmark's preset: "lan", whose Raft lease survives
// the CPU saturation of N nodes on this 2-core box better than "fast"'s
// (a node out of contact sends nothing, which is not the budget's doing).
var fleetTiming = "lan"

// BenchmarkFleetBudget runs, at N = 3 and 5, the skewed backlog once with
// the budget and once without (-benchtime=1x). Metrics:
//
//	fleet-rate/budget: the most calls in any 1 s window / budget (target ≤ 1.05)
//	utilisation: calls / (budget × seconds) from the moment every task was
//	submitted to the last call (target ≥ 0.9; the baseline's is N × its share)
//	drain-s: first call → last call
//	stale-releases: dispatches the nodes gave back because they were out of
//	contact with the cluster (the box's CPU stalls the fast preset's Raft
//	lease): time in which no node may send, which lowers the budget used
func BenchmarkFleetBudget(b *testing.B) {
	for _, n := range []int{3, 5} {
		for _, mode := range []string{"budget", "no_budget"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				bc := startFleetCluster(b, b, n)
				r := fleetRun(b, bc, mode == "budget")
				b.ReportMetric(r.peak/fleetBudget, "fleet-rate/budget")
				b.ReportMetric(r.utilisation, "utilisation")
				b.ReportMetric(r.drain.Seconds(), "drain-s")
				b.ReportMetric(r.peak, "peak-calls/s")
				b.ReportMetric(r.stale, "stale-releases")
			})
		}
	}
}

// startFleetCluster starts n nodes (fast timing, 8 shards per node) like
// startBenchCluster; they are closed in owner's cleanup.
func startFleetCluster(tb, owner testing.TB, n int) *benchCluster {
	tb.Helper()
	dir := owner.TempDir()
	bc := &benchCluster{}
	before := goleak.IgnoreCurrent()
	owner.Cleanup(func() { awaitStrayGoroutines(before) }) // runs after the cluster's cleanup below
	owner.Cleanup(func() {
		for _, nd := range bc.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_ = nd.Close(ctx)
			cancel()
		}
	})
	var join []string
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		cfg := Config{NodeID: id, DataDir: filepath.Join(dir, id), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
			Join: join, BootstrapExpect: min(n, 3), Shards: 8 * n, Timing: fleetTiming, Version: "bench"}
		nd, err := New(cfg, testLogger(nil))
		if err != nil {
			tb.Fatal(err)
		}
		bc.nodes = append(bc.nodes, nd)
		if err := nd.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
		bc.clients = append(bc.clients, api.NewClient(nd.HTTPAddr(), "", nil))
		join = append(join, nd.GossipAddr())
	}
	testwait.For(tb, 90*time.Second, "cluster ready with settled shards", func() bool {
		for _, nd := range bc.nodes {
			if ok, _ := nd.ready(); !ok || nd.members.NumAlive() != n {
				return false
			}
		}
		return shardsSettled(tb, bc.nodes)
	})
	return bc
}

// skewedTasks returns callback tasks to url whose shards the nodes own in
// the proportions of weights (each node's share of total).
func skewedTasks(tb testing.TB, nodes []*Node, url, prefix string, total int, weights []float64) []api.TaskSubmit {
	tb.Helper()
	m := nodes[0].store.Reader().ShardMap()
	want := map[string]int{}
	left := total
	for i, nd := range nodes {
		c := int(float64(total) * weights[i])
		if i == len(nodes)-1 {
			c = left
		}
		want[nd.cfg.NodeID] = c
		left -= c
	}
	var out []api.TaskSubmit
	for i := 0; len(out) < total; i++ {
		if i > 100*total {
			tb.Fatalf("no workflow ids found for the skew %v", want)
		}
		t := deliverybench.Task(url, fmt.Sprintf("%s-%d", prefix, i), true)
		owner := m.Shards[shardmap.ShardOf(t.NamespaceID, t.WorkflowID, m.NumShards)].Owner
		if want[owner] > 0 {
			want[owner]--
			out = append(out, t)
		}
	}
	return out
}

// skew is 80 % on the first node, the rest evenly.
func skew(n int) []float64 {
	w := make([]float64, n)
	w[0] = 0.8
	for i := 1; i < n; i++ {
		w[i] = 0.2 / float64(n-1)
	}
	return w
}

type fleetResult struct {
	peak        float64 // most calls in a 1 s window
	utilisation float64
	drain       time.Duration
	stale       float64 // stale_ownership releases during the run, all nodes
}

func fleetRun(tb testing.TB, bc *benchCluster, budget bool) fleetResult {
	tb.Helper()
	dest := transporttest.NewDestination(tb)
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	bc.setConfig(tb, dynconfig.KeyHostSchedulerMaxTaskRPS, host, fmt.Sprint(fleetBudget))
	bc.setConfig(tb, dynconfig.KeyGroupLimiterBufferSize, host, "5000")
	if budget {
		bc.setConfig(tb, dynconfig.KeyFleetRPS, host, fmt.Sprint(fleetBudget))
	}
	tasks := skewedTasks(tb, bc.nodes, dest.CallbackURL(), fmt.Sprintf("fleet-%v", budget), fleetBacklog, skew(len(bc.nodes)))
	if b, ok := tb.(*testing.B); ok {
		b.ResetTimer()
	}
	stale0 := staleReleases(tb, bc.nodes)
	ids := deliverybench.SubmitAll(tb, bc.clients, tasks)
	submitted := time.Now()
	bc.waitSucceeded(tb, ids)
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	r := measureFleet(dest.Calls(), submitted, fleetBudget)
	r.stale = staleReleases(tb, bc.nodes) - stale0
	return r
}

// staleReleases sums fusebox_queue_scheduler_rejections_total{reason=
// "stale_ownership"} over nodes.
func staleReleases(tb testing.TB, nodes []*Node) float64 {
	var sum float64
	for _, n := range nodes {
		mfs, err := n.reg.Gather()
		if err != nil {
			tb.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "fusebox_queue_scheduler_rejections_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == "stale_ownership" {
						sum += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return sum
}

// measureFleet reads the destination's successful calls: the most in any
// 1 s window, and the rate from `from` to the last call over the budget.
func measureFleet(calls []transporttest.Call, from time.Time, budget float64) fleetResult {
	var at []time.Time
	for _, c := range calls {
		if c.Status >= 200 && c.Status < 300 {
			at = append(at, c.At)
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	var r fleetResult
	if len(at) == 0 {
		return r
	}
	j := 0
	for i := range at {
		for at[i].Sub(at[j]) >= time.Second {
			j++
		}
		r.peak = max(r.peak, float64(i-j+1))
	}
	last := at[len(at)-1]
	r.drain = last.Sub(at[0])
	after := 0
	for _, t := range at {
		if !t.Before(from) {
			after++
		}
	}
	if d := last.Sub(from).Seconds(); d > 0 {
		r.utilisation = float64(after) / (d * budget)
	}
	return r
}
