package queue

import (
	"time"

	"fusebox/breakerpool"
)

// ShardState reports test-visible state of this node's work on a shard.
type ShardState struct {
	Wakeups, Reads uint64
	Offers         uint64 // tasks offered to the scheduler, taken or refused
	Lost, Stopped  bool
	InFlight       int
	Held           int  // refused by a full buffer, kept for the next offer
	HandedOver     bool // a hand-over holds the shard (handover.go)
}

// ShardState returns the state of shard id; ok is false if not running.
func (q *Queue) ShardState(id int) (st ShardState, ok bool) {
	q.mu.Lock()
	s := q.shards[id]
	q.mu.Unlock()
	if s == nil {
		return st, false
	}
	st.Wakeups, st.Reads, st.Offers = s.wakeups.Load(), s.reads.Load(), s.offers.Load()
	_, st.HandedOver = s.ho.holding(time.Now())
	s.mu.Lock()
	st.Lost, st.InFlight, st.Held = s.lost, len(s.inflight), s.held.len()
	s.mu.Unlock()
	select {
	case <-s.readerDone:
		st.Stopped = true
	default:
	}
	return st, true
}

// GroupTokens returns the rate-limiter tokens of k's group.
func (q *Queue) GroupTokens(k breakerpool.Key) (float64, bool) {
	q.sched.mu.RLock()
	defer q.sched.mu.RUnlock()
	g := q.sched.groups[k]
	if g == nil {
		return 0, false
	}
	return g.lim.Tokens(), true
}

// GroupCount is the number of live scheduler groups.
func (q *Queue) GroupCount() int { return q.sched.groupCount() }

// RampRate is rampRate.
var RampRate = rampRate

// RetuneAt runs the ramp loop's retune with now.
func (q *Queue) RetuneAt(now time.Time) { q.sched.retune(now) }

// GroupRate returns the rate limit and burst of k's group.
func (q *Queue) GroupRate(k breakerpool.Key) (limit float64, burst int, ok bool) {
	q.sched.mu.RLock()
	defer q.sched.mu.RUnlock()
	g := q.sched.groups[k]
	if g == nil {
		return 0, 0, false
	}
	return float64(g.lim.Limit()), g.lim.Burst(), true
}

// CreateGroups makes a scheduler group for each key, as a first task of it
// would (benchmarks: a node with many idle keys).
func (q *Queue) CreateGroups(keys []breakerpool.Key) {
	for _, k := range keys {
		q.sched.create(k)
	}
}

// RetuneEveryGroup is retune as it was before the thirty-seventh session,
// the same-run baseline of BenchmarkRetune: it walks every group with a
// limits lookup each (fleetManaged), whatever the group is.
func (q *Queue) RetuneEveryGroup(now time.Time) {
	s := q.sched
	l := s.q.limits.Current()
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.rmu.Lock()
	touched := make(map[breakerpool.Key]bool, len(s.ramps))
	for k, r := range s.ramps {
		if r.since.After(now) {
			continue
		}
		touched[k] = true
		_, _, _, ok := s.rampOfLocked(l, k, now)
		if !ok || (r.armed && s.groups[k] == nil && now.Sub(r.since) > rampArmTTL) {
			delete(s.ramps, k)
		}
	}
	s.rmu.Unlock()
	for k, g := range s.groups {
		if touched[k] || s.q.fleetManaged(l, k) {
			s.tune(g, l, now, false)
		}
	}
}

// LoseRecallSignals forgets every group's shards waiting for it to run dry
// and every shard's dry flag, as an edge lost anywhere would (recall.go,
// recallBackstop).
func (q *Queue) LoseRecallSignals() {
	q.sched.mu.RLock()
	for _, g := range q.sched.groups {
		g.mu.Lock()
		g.dry = nil
		g.mu.Unlock()
	}
	q.sched.mu.RUnlock()
	q.mu.Lock()
	for _, s := range q.shards {
		s.dry.Store(false)
	}
	q.mu.Unlock()
}
