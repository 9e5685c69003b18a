package ownership

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	owned   prometheus.Gauge
	version prometheus.Gauge
	commits *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fusebox_shards_owned",
			Help: "Shards this node owns in the committed shard map.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fusebox_shard_map_version",
			Help: "Version of the committed shard map this node follows.",
		}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_shard_map_commits_total",
			Help: "Shard maps proposed by this node as Raft leader, by result (ok, stale, error).",
		}, []string{"result"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.owned, m.version, m.commits} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ownership: metrics: %w", err)
		}
	}
	return m, nil
}
