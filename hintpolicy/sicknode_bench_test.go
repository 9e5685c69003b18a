package hintpolicy

import (
	"fmt"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport/transporttest"
)

// BenchmarkSickNode is issue 19 §5's sick-node scenario: N = 5 nodes each
// run tasks for one healthy destination at a steady 20/s (Timeout 1s), but
// n0's own egress fails every call (its calls go to a refusing address).
// For sickFor the healthy nodes keep calling. Metrics:
//
//   - healthy-delivered: the healthy nodes' delivered tasks over their
//     tasks (delivered, failed or rejected by an open breaker) — 1 when n0
//     cannot black-hole the destination for the fleet;
//   - sick-calls: n0's calls that reached its broken egress, per second.
//
// Run with -benchtime=1x.
func BenchmarkSickNode(b *testing.B) {
	for _, pol := range []breakerpool.HintPolicy{breakerpool.HintOff, breakerpool.HintProbe, breakerpool.HintAdopt, breakerpool.HintConfirm} {
		b.Run("policy="+string(pol), func(b *testing.B) { benchSickNode(b, pol) })
	}
}

func benchSickNode(b *testing.B, pol breakerpool.HintPolicy) {
	const (
		size    = 5
		rate    = 20
		timeout = time.Second
		sickFor = 10 * time.Second
	)
	dest := transporttest.NewDestination(b)
	broken := transporttest.NewDestination(b)
	if err := broken.SetMode(transporttest.ModeRefuse); err != nil {
		b.Fatal(err)
	}
	nodes := startPCluster(b, size, testSettings(pol, timeout), Config{})
	setURL(dest.CallbackURL(), nodes[1:]...)
	setURL(broken.CallbackURL(), nodes[0])
	client := newClient(b)
	var delivered, sick float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := testKey(fmt.Sprint("sick-", i))
		var drivers []*driver
		for _, n := range nodes {
			drivers = append(drivers, drive(b, n, client, k, rate))
		}
		time.Sleep(sickFor) // measuring a period of the scenario, not waiting for a condition
		for _, d := range drivers {
			d.stop()
		}
		var ok, all int64
		for _, d := range drivers[1:] {
			ok += d.ok.Load()
			all += d.ok.Load() + d.down.Load() + d.blocked.Load()
		}
		delivered += float64(ok) / float64(max(all, 1))
		sick += float64(drivers[0].down.Load()) / sickFor.Seconds()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(delivered/n, "healthy-delivered")
	b.ReportMetric(sick/n, "sick-calls/s")
}
