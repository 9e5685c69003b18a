package node

import (
	"testing"

	"fusebox/transport/outbound/outboundtest"
)

func BenchmarkTmpRejections(b *testing.B) {
	dest := outboundtest.NewDestination(b)
	bc := startBenchCluster(b, b, DefaultShards)
	b.ResetTimer()
	took := bc.deliverRun(b, 1, b.N, dest.CallbackURL())
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "tasks/s")
	total := 0.0
	for _, n := range bc.nodes {
		mfs, _ := n.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "fusebox_queue_scheduler_rejections_total" {
				for _, m := range mf.GetMetric() {
					if m.GetLabel()[0].GetValue() == "buffer_full" {
						total += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	b.ReportMetric(total, "rejections")
}
