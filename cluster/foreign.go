package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Members of another cluster. A node advertises the cluster id of the Raft
// history its data dir holds (Meta.ClusterID; "" on a fresh data dir or an
// older build). A node whose id is set refuses, as memberlist's alive and
// merge delegates, the alive messages and the join merges of nodes that
// advertise another: a node of another cluster — restarted on its data
// dir and pointed at this cluster's --join by mistake — never becomes a
// member here, so its breaker hints and fleet reports never reach this
// cluster, and its join fails where it is made. memberlist's own advice:
// an alive delegate, as a merge delegate alone still lets clusters merge
// passively. (The Raft leader and shard placement refuse such members too,
// should one be known before its id or ours was: raftstore.Member.Foreign.)

// foreignLogEvery bounds the log lines per refused peer.
const foreignLogEvery = time.Minute

// foreignLog remembers when each refused peer was last logged.
type foreignLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// foreign returns an error if meta (a peer's encoded metadata) names
// another cluster than ours; "" on either side is never foreign.
func (m *Membership) foreign(name string, meta []byte) error {
	if name == m.cfg.NodeID {
		return nil
	}
	ours := m.ClusterID()
	if ours == "" {
		return nil
	}
	pm, err := decodeMeta(meta)
	if err != nil || pm.ClusterID == "" || pm.ClusterID == ours {
		return nil // bad metadata is counted where it is used (memberTable)
	}
	return fmt.Errorf("%s holds the Raft state of cluster %s, this node of cluster %s: not a member here", name, pm.ClusterID, ours)
}

// refuseForeign counts and (rate-limited) logs a refusal.
func (m *Membership) refuseForeign(kind, name string, err error) {
	m.metrics.foreignRefused.WithLabelValues(kind).Inc()
	m.foreignLog.mu.Lock()
	if m.foreignLog.last == nil {
		m.foreignLog.last = map[string]time.Time{}
	}
	now := time.Now()
	log := now.Sub(m.foreignLog.last[name]) >= foreignLogEvery
	if log {
		m.foreignLog.last[name] = now
	}
	m.foreignLog.mu.Unlock()
	if log {
		m.log.Error("refused a node of another cluster; to join this cluster it must start on a new data dir", "kind", kind, "err", err)
	}
}

// NotifyAlive implements memberlist.AliveDelegate. It runs with
// memberlist's node lock held: it must not call memberlist.
func (d *delegate) NotifyAlive(peer *memberlist.Node) error {
	if err := d.m.foreign(peer.Name, peer.Meta); err != nil {
		d.m.refuseForeign("alive", peer.Name, err)
		return err
	}
	return nil
}

// NotifyMerge implements memberlist.MergeDelegate: a join's push/pull
// that brings a node of another cluster is refused whole.
func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		if err := d.m.foreign(p.Name, p.Meta); err != nil {
			d.m.refuseForeign("merge", p.Name, err)
			return err
		}
	}
	return nil
}
