package hintpolicy

import (
	"fmt"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport/transporttest"
)

// BenchmarkDeadDestinationGrowth is the cost of a dead destination as the
// cluster grows (issue "make bench": N = 3 → 5 → 9): every node runs tasks
// for the key at a steady 20/s, Timeout 1s, then the destination goes down
// for 3 s. Policy probe (the default) beside policy off (no hints: each node
// on its own, the baseline) at the same N. Metrics:
//
//   - trip-calls: calls from the outage's start until every node is open
//     (off: 6N; probe with the early warning: about 2N+1).
//   - probes/timeout: calls per Timeout once every node is open (off: about
//     N, every node probes; probe: the probe owner's, about 1).
//   - wasted-calls/node: every call the dead destination received, per node.
//
// BenchmarkHintDelay has N as a dimension already (hint delay growth).
// Policies confirm and adopt run beside probe at every N (issue 19 §5:
// confirm's calls until all open ≤ 8 at N = 3, 5, 9, 17); off up to N = 9.
// Run with -benchtime=1x.
func BenchmarkDeadDestinationGrowth(b *testing.B) {
	for _, size := range []int{3, 5, 9, 17} {
		for _, pol := range []breakerpool.HintPolicy{breakerpool.HintProbe, breakerpool.HintOff, breakerpool.HintAdopt, breakerpool.HintConfirm} {
			if pol == breakerpool.HintOff && size > 9 {
				continue
			}
			b.Run(fmt.Sprintf("N=%d/policy=%s", size, pol), func(b *testing.B) { benchDeadGrowth(b, size, pol) })
		}
	}
}

func benchDeadGrowth(b *testing.B, size int, pol breakerpool.HintPolicy) {
	const (
		rate    = 20
		timeout = time.Second
		steady  = 3 * time.Second
	)
	dest := transporttest.NewDestination(b)
	nodes := startPCluster(b, size, testSettings(pol, timeout), Config{})
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(b)
	var trip, perTimeout, wasted float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := testKey(fmt.Sprint("growth-", i))
		var drivers []*driver
		for _, n := range nodes {
			drivers = append(drivers, drive(b, n, client, k, rate))
		}
		waitAll(b, "every node to deliver", func(j int) bool { return drivers[j].ok.Load() > 0 }, size)

		if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
			b.Fatal(err)
		}
		start := dest.Count("")
		waitAll(b, "every node to open", func(j int) bool { return settledOpen(nodes[j], k) }, size)
		opened := dest.Count("")
		trip += float64(opened - start)
		time.Sleep(steady) // measuring a period of outage, not waiting for a condition
		end := dest.Count("")
		perTimeout += float64(end-opened) / (float64(steady) / float64(timeout))
		wasted += float64(end-start) / float64(size)
		up(b, dest, drivers)
		for _, d := range drivers {
			d.stop()
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(trip/n, "trip-calls")
	b.ReportMetric(perTimeout/n, "probes/timeout")
	b.ReportMetric(wasted/n, "wasted-calls/node")
}
