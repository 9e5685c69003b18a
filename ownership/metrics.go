package ownership

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/raftstore"
	"fusebox/shardmap"
)

type metrics struct {
	owned   prometheus.Gauge
	version prometheus.Gauge
	commits *prometheus.CounterVec
	// handovers counts the leader's hand-over calls, by result.
	handovers *prometheus.CounterVec
	// fenced counts the shards whose epoch the leader raised past the
	// task store's fence (fences.go).
	fenced prometheus.Counter
}

// newMetrics builds the metrics and registers them on reg (if not nil);
// unowned computes fusebox_shards_unowned at scrape time.
func newMetrics(reg prometheus.Registerer, unowned func() float64) (*metrics, error) {
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
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_shard_handovers_total",
			Help: "Hand-overs this node asked of a live owner as Raft leader before moving its shards, by result (ok: its calls ended and results were written; unfinished: some were still under way at the wait's end; error: the owner could not be asked; interrupted: a member failed during the wait, and the leader placed again at once).",
		}, []string{"result"}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fusebox_shard_epochs_raised_total",
			Help: "Shards whose epoch this node, as Raft leader, raised past the task store's fence of the shard, which was ahead of the shard map: a cluster rebuilt on an older cluster's database (once per shard), or two clusters sharing one database (rising steadily).",
		}),
	}
	for _, r := range []string{"ok", "unfinished", "error", "interrupted"} {
		m.handovers.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	unownedGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fusebox_shards_unowned",
		Help: "Shards of the committed shard map with no owner, or whose owner is not an alive (or suspect) member, as this node sees them.",
	}, unowned)
	for _, c := range []prometheus.Collector{m.owned, m.version, m.commits, m.handovers, m.fenced, unownedGauge} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ownership: metrics: %w", err)
		}
	}
	return m, nil
}

// unownedShards is fusebox_shards_unowned: the shards of the committed map
// (as this node follows it) that no live member owns — owner "" (released,
// or placed while nobody was live) or a member that gossip reports failed
// or left, or does not know. Alive and suspect members count as live, as
// for placement: a suspect keeps its shards. Computed at scrape time from
// the holder and the membership, so it is current without a goroutine; 0
// before the first map (the alert's other branch covers a cluster where
// nobody owns anything).
func (m *Manager) unownedShards() float64 {
	return float64(unowned(m.holder.Load(), m.members.Members()))
}

// unowned counts the shards of sm whose owner is not a live member.
func unowned(sm *shardmap.Map, members []raftstore.Member) int {
	if sm == nil {
		return 0
	}
	live := make(map[string]bool, len(members))
	for _, mb := range members {
		if mb.ID != "" && (mb.Status == raftstore.MemberAlive || mb.Status == raftstore.MemberSuspect) {
			live[mb.ID] = true
		}
	}
	n := 0
	for _, a := range sm.Shards {
		if !live[a.Owner] { // "" is never live
			n++
		}
	}
	return n
}
