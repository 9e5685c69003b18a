package node

import (
	"net"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// BenchmarkSickEgress is durable delivery with one node's egress to the
// destination broken (hintpolicy/DESIGN.md, "Calls through a peer"): n1's
// calls leave from 127.0.0.2, which destination "sick" resets, so the
// third of the tasks on n1's shards go through a peer; destination
// "healthy" takes every node's calls. Blocks of sickBlock tasks to each
// alternate in one run (order swapped every pair, one uncounted pair
// first, which also starts the delegation), b.N pairs. Metrics: ratio
// (the sick destination's rate over the healthy one's), each side's
// tasks/s, and requests to a peer (calls through it) per task of a sick
// block.
// Run with -benchtime=3x.
func BenchmarkSickEgress(b *testing.B) {
	const sickBlock = 6000
	if ln, err := net.Listen("tcp", sickSource+":0"); err != nil {
		b.Skipf("cannot use %s as a source address here: %v", sickSource, err)
	} else {
		_ = ln.Close()
	}
	healthy, sick := transporttest.NewDestination(b), transporttest.NewDestination(b)
	healthy.CountOnly()
	sick.CountOnly()
	sick.RefuseFrom(sickSource)
	bc := startBenchClusterWith(b, b, DefaultShards, "fast", func(cfg *Config) {
		if cfg.NodeID == "n1" {
			cfg.OutboundSourceAddr = sickSource
		}
	})
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, sick.CallbackURL())
	bc.setConfig(b, dynconfig.KeyBreakerSettings, host, `{"Timeout":"1s","FailureThreshold":2}`)
	sent := func() float64 {
		return bc.sumMetricWhere(b, "fusebox_delegated_calls_total", "side", "sent")
	}
	var wall [2]time.Duration // 0 healthy, 1 sick
	run := 0
	side := func(s int) {
		run++
		url := healthy.CallbackURL()
		if s == 1 {
			url = sick.CallbackURL()
		}
		wall[s] += bc.deliverRun(b, run, sickBlock, url)
	}
	side(1) // warm up, untimed: n1 trips and starts going through a peer
	side(0)
	wall = [2]time.Duration{}
	sent0 := sent()
	b.ResetTimer()
	for i := range b.N {
		first := i % 2
		side(first)
		side(1 - first)
	}
	b.StopTimer()
	n := float64(b.N * sickBlock)
	b.ReportMetric(wall[0].Seconds()/wall[1].Seconds(), "ratio")
	b.ReportMetric(n/wall[0].Seconds(), "healthy-tasks/s")
	b.ReportMetric(n/wall[1].Seconds(), "sick-tasks/s")
	b.ReportMetric((sent()-sent0)/n, "peer-requests/task")
}
