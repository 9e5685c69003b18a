package raftstore

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	applyLatency prometheus.Histogram
	forwarded    *prometheus.CounterVec
	submitBatch  prometheus.Histogram
	// completeBatch: complete_batch.go.
	completeBatch prometheus.Histogram
	// groupCommit: group_commit.go, by batcher and phase.
	groupCommit *prometheus.HistogramVec
}

// groupCommitObservers are batcher's two fusebox_raft_group_commit_seconds
// series (none without a store: tests of a batcher's limits alone).
func (s *Store) groupCommitObservers(batcher string) (wait, write prometheus.Observer) {
	if s == nil || s.metrics == nil {
		return nil, nil
	}
	return s.metrics.groupCommit.WithLabelValues(batcher, "wait"), s.metrics.groupCommit.WithLabelValues(batcher, "write")
}

func newMetrics(reg prometheus.Registerer, s *Store) (*metrics, error) {
	m := &metrics{
		applyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fusebox_raft_apply_duration_seconds",
			Help:    "Latency of a raft apply on the leader, from propose to FSM result.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 15),
		}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_raft_forwarded_writes_total",
			Help: "Writes this node forwarded to the raft leader, by outcome (ok, error).",
		}, []string{"outcome"}),
		submitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fusebox_raft_submit_coalesced_tasks",
			Help:    "Single-task submits this node sent together in one raft entry (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		completeBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fusebox_raft_complete_coalesced_shards",
			Help:    "Completes (one shard's results each) this node sent together in one raft entry (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		groupCommit: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fusebox_raft_group_commit_seconds",
			Help:    "Group commit of single submits and completes: a write's time queued behind the batches in flight (phase=wait), and a batch's write, forwarded or proposed, until committed and applied on the leader (phase=write).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"batcher", "phase"}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{
		m.applyLatency, m.forwarded, m.submitBatch, m.completeBatch, m.groupCommit,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fusebox_raft_state",
			Help: "Raft state of this node: 0 follower, 1 candidate, 2 leader, 3 shutdown.",
		}, func() float64 { return float64(s.State()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fusebox_raft_log_write_failures_total",
			Help: "Writes to this node's raft log store that failed (a full disk, an I/O error). While they fail the node makes no call and is not ready; after LogFailFatal of failing writes it stops.",
		}, func() float64 {
			if s.guard == nil {
				return 0
			}
			return float64(s.guard.failures.Load())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fusebox_raft_applied_index",
			Help: "Raft index of the last entry this node's FSM applied.",
		}, func() float64 { return float64(s.fsm.AppliedIndex()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("raftstore: metrics already registered (one Registerer per node): %w", err)
			}
			return nil, fmt.Errorf("raftstore: register metrics: %w", err)
		}
	}
	return m, nil
}
