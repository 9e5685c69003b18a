package cluster

import (
	"context"
	"math/rand/v2"
	"time"
)

// joinLoop joins the cluster in the background. Until a join succeeds it
// retries with exponential backoff (with jitter), each time with every
// address known so far: the seeds plus members already seen. After that it
// re-joins members marked dead (reconnectLoop).
func (m *Membership) joinLoop(ctx context.Context) {
	backoff := m.t.joinMin
	for !m.Joined() {
		if m.tryJoin(m.joinAddrs()) {
			m.markJoined()
			m.log.Info("joined the cluster", "members", m.NumAlive())
			break
		}
		timer := time.NewTimer(jitter(backoff))
		backoff = min(2*backoff, m.t.joinMax)
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
	m.reconnectLoop(ctx)
}

// reconnectLoop re-joins members marked dead (not left), so that the two
// sides of a healed partition, which marked each other dead, merge again
// (serf's reconnect). memberlist does not bring them back by itself: it
// gossips to a dead member only while it has broadcasts queued, and probes
// only live ones. A member newly marked dead is tried again soon, then less
// and less often (reconnectSchedule): at a fixed 30 s, members apart for a
// short partition stayed apart for up to 30 s after it healed (18 s in
// TestPartitionedOwnerStopsCalling), while a member gone for good still
// costs one join attempt per reconnect interval.
func (m *Membership) reconnectLoop(ctx context.Context) {
	wake, unsub := m.table.subscribe()
	defer unsub()
	sched := newReconnectSchedule(m.t.joinMin, m.t.reconnect)
	first := m.t.reconnect
	if sched.saw(m.table.snap.Load().failed) { // dead members learnt at the join
		first = sched.next()
	}
	timer := time.NewTimer(jitter(first))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		case _, ok := <-wake:
			if !ok {
				return
			}
			if sched.saw(m.table.snap.Load().failed) {
				timer.Reset(jitter(sched.next()))
			}
			continue
		case <-timer.C:
		}
		failed := m.table.snap.Load().failed
		sched.saw(failed)
		if len(failed) > 0 {
			m.tryJoin(failed)
		}
		timer.Reset(jitter(sched.next()))
	}
}

// reconnectSchedule paces the re-joins of dead members: first after min
// once a member is newly dead, then doubling up to max, where it stays.
type reconnectSchedule struct {
	min, max, wait time.Duration
	dead           map[string]bool // the dead members' addresses last seen
}

func newReconnectSchedule(minWait, maxWait time.Duration) *reconnectSchedule {
	return &reconnectSchedule{min: minWait, max: maxWait, wait: maxWait, dead: map[string]bool{}}
}

// saw records the dead members' addresses now and reports whether one of
// them was not dead at the last look: the schedule then starts again from
// min.
func (r *reconnectSchedule) saw(failed []string) bool {
	fresh := false
	now := make(map[string]bool, len(failed))
	for _, a := range failed {
		now[a] = true
		fresh = fresh || !r.dead[a]
	}
	r.dead = now
	if fresh {
		r.wait = r.min
	}
	return fresh
}

// next is the wait before the next attempt; the one after it doubles.
func (r *reconnectSchedule) next() time.Duration {
	w := r.wait
	r.wait = min(2*r.wait, r.max)
	return w
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
