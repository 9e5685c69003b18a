package cluster

import (
	"context"
	"math/rand/v2"
	"time"
)

// joinLoop joins the cluster in the background. Until a join succeeds it
// retries with exponential backoff (with jitter), each time with every
// address known so far: the seeds plus members already seen. After that,
// every reconnect interval, it re-joins members marked dead (not left), so
// partitions that marked each other dead merge again once healed (serf's
// reconnect).
func (m *Membership) joinLoop(ctx context.Context) {
	backoff := m.t.joinMin
	for {
		var wait time.Duration
		if !m.Joined() {
			if m.tryJoin(m.joinAddrs()) {
				m.markJoined()
				m.log.Info("joined the cluster", "members", m.NumAlive())
				wait = m.t.reconnect
			} else {
				wait = jitter(backoff)
				backoff = min(2*backoff, m.t.joinMax)
			}
		} else {
			if addrs := m.table.snap.Load().failed; len(addrs) > 0 {
				m.tryJoin(addrs)
			}
			wait = jitter(m.t.reconnect)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-m.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// joinAddrs returns the seeds plus the gossip addresses of members seen so
// far, without this node and without duplicates.
func (m *Membership) joinAddrs() []string {
	self := m.GossipAddr()
	seen := map[string]bool{self: true}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, a := range m.cfg.Join {
		add(a)
	}
	for _, mem := range m.table.snap.Load().members {
		if mem.ID != m.cfg.NodeID && mem.State != StateLeft {
			add(mem.GossipAddr)
		}
	}
	return out
}

// tryJoin runs one memberlist Join and reports whether any address answered.
func (m *Membership) tryJoin(addrs []string) bool {
	if len(addrs) == 0 {
		return false
	}
	n, err := m.ml.Load().Join(addrs)
	if n > 0 {
		m.metrics.joinAttempts.WithLabelValues("ok").Inc()
		return true
	}
	m.metrics.joinAttempts.WithLabelValues("error").Inc()
	m.log.Debug("join attempt failed", "addrs", addrs, "err", err)
	return false
}

// jitter returns d scaled by a random factor in [0.8, 1.2).
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
