package queue

import (
	"math"
	"time"

	"golang.org/x/time/rate"

	"fusebox/breakerpool"
)

// Staged recovery (issue 19 §2, RECOVERY.md "Staged recovery").
//
// When a key's breaker closes after an outage, its backlog — every task the
// open breaker refused, released at once (release.go), plus every task
// that came due meanwhile — would reach the destination at the group's full
// rate, from every node at once. Instead the group's limiter ramps: it
// starts at this node's share of the fleet-wide rampStartRPS with no saved
// tokens (burst 1) and rises in rampStage steps to the rate the key would
// have otherwise, over rampDuration. Each node ramps from its own close:
// the probe owner closes first, the others follow their close hint.

// rampStage is the length of one ramp step: the rate is constant within a
// stage, so the first second after a close runs at exactly the start rate.
const rampStage = time.Second

// rampArmTTL bounds how long an armed ramp whose key has no group is kept
// (a key that opened on a hint and never had a task here).
const rampArmTTL = time.Hour

// ramp is a key's recovery ramp. Armed (the breaker opened or is probing):
// the limiter already runs at the start rate with burst 1, so the calls the
// close lets through before KeyClosed reaches the queue (the pool's
// observer runs asynchronously) find no saved-up burst. Under way (after
// the close): since is the close.
type ramp struct {
	since time.Time // the close; while armed, when it was armed
	armed bool
}

// rampTick is how often the ramp (and the fleet budget) retune limiters.
const rampTick = 100 * time.Millisecond

// RampLimits are the ramp's dynamic settings (dynconfig's Snapshot has
// them). Limits without them never ramp.
type RampLimits interface {
	// RampStartRPS is the fleet-wide rate of the first stage.
	RampStartRPS(namespaceID, destination string) float64
	// RampDuration is how long the ramp lasts; 0 means no ramp.
	RampDuration(namespaceID, destination string) time.Duration
}

// FleetShare tells this node's part of a key's fleet-wide rates. Deps.Fleet
// nil means this node is the whole fleet (share 1).
type FleetShare interface {
	// Share is this node's fraction, in (0, 1], of k's fleet-wide rates.
	Share(k breakerpool.Key) float64
}

// FleetBudgetShare is an optional extension of FleetShare for the fleet
// rate budget (fleet.go), whose share may need to be more careful than a
// ramp's: node/ gives 0 instead of an equal split while it cannot know its
// peers' shares yet.
type FleetBudgetShare interface {
	BudgetShare(k breakerpool.Key) float64
}

// rampRate is the rate `elapsed` after a ramp began from start towards
// target over d, in stages of rampStage; done is true once the ramp is
// over (or pointless: start already at or above target).
func rampRate(start, target float64, d, elapsed time.Duration) (r float64, done bool) {
	if d <= 0 || elapsed >= d || elapsed < 0 || !(start < target) {
		return target, true
	}
	steps := math.Ceil(float64(d) / float64(rampStage))
	k := math.Floor(float64(elapsed) / float64(rampStage))
	if k == 0 {
		return start, false
	}
	if math.IsInf(target, 1) {
		return target, true
	}
	return start + (target-start)*k/steps, false
}

// budgetShare is this node's share of k's fleet rate budget: the Fleet's
// BudgetShare when it has one, else its Share.
func (q *Queue) budgetShare(k breakerpool.Key) float64 {
	if bs, ok := q.fleet.(FleetBudgetShare); ok {
		s := bs.BudgetShare(k)
		if !(s > 0) {
			return 0
		}
		return min(s, 1)
	}
	return q.share(k)
}

// share is this node's share of k's fleet-wide rates.
func (q *Queue) share(k breakerpool.Key) float64 {
	if q.fleet == nil {
		return 1
	}
	s := q.fleet.Share(k)
	if !(s > 0) {
		return 0
	}
	return min(s, 1)
}

// RampStatus is where a key's recovery ramp stands on this node.
type RampStatus struct {
	Since, Until time.Time
	StartRPS     float64 // this node's first-stage rate
	RPS          float64 // this node's rate now
	TargetRPS    float64 // the rate at the end (+Inf: unlimited)
}

// rampOfLocked returns k's ramp; ok is false when there is none or it is
// over (retune forgets it then). An armed ramp is ok with d 0. s.rmu held.
func (s *scheduler) rampOfLocked(l Limits, k breakerpool.Key, now time.Time) (r ramp, d time.Duration, startRPS float64, ok bool) {
	r, ok = s.ramps[k]
	if !ok {
		return r, 0, 0, false
	}
	rl, has := l.(RampLimits)
	if !has {
		return r, 0, 0, false
	}
	d = rl.RampDuration(k.NamespaceID, k.Destination)
	if d <= 0 || (!r.armed && (now.Sub(r.since) >= d || now.Before(r.since))) {
		return r, 0, 0, false
	}
	startRPS = rl.RampStartRPS(k.NamespaceID, k.Destination) * s.q.share(k)
	if r.armed {
		return r, 0, startRPS, true
	}
	return r, d, startRPS, true
}

// rateFor is the rate and burst k's limiter has now: the configured rate
// (limitsFor, or the fleet budget's share), lowered by a ramp under way.
// ramping tells whether a ramp set it.
func (s *scheduler) rateFor(l Limits, k breakerpool.Key, now time.Time) (rps rate.Limit, burst int, ramping bool) {
	_, _, rps, burst = limitsFor(l, k)
	rps, burst = s.q.fleetRate(l, k, rps, burst)
	s.rmu.Lock()
	rp, d, start, ok := s.rampOfLocked(l, k, now)
	s.rmu.Unlock()
	if !ok || rps == 0 {
		return rps, burst, false
	}
	if rp.armed {
		if start < float64(rps) {
			return rate.Limit(start), 1, true
		}
		return rps, burst, false
	}
	target := float64(rps)
	if rps == rate.Inf {
		target = math.Inf(1)
	}
	r, done := rampRate(start, target, d, now.Sub(rp.since))
	if done {
		return rps, burst, false
	}
	return rate.Limit(r), 1, true
}

// tune applies rateFor to g's limiter and wakes its token waiters when it
// changed. drain also takes the token saved up, if any (a ramp's start).
func (s *scheduler) tune(g *group, l Limits, now time.Time, drain bool) {
	rps, burst, _ := s.rateFor(l, g.key, now)
	changed := false
	if g.lim.Limit() != rps {
		g.lim.SetLimitAt(now, rps)
		changed = true
	}
	if g.lim.Burst() != burst {
		g.lim.SetBurstAt(now, burst)
		changed = true
	}
	if drain {
		g.lim.AllowN(now, 1) // tokens are ≤ burst = 1 now: none is left saved
	}
	if changed {
		g.mu.Lock()
		close(g.changed)
		g.changed = make(chan struct{})
		g.mu.Unlock()
	}
}

// startRamp begins k's ramp now (a close), if k ramps at all.
func (s *scheduler) startRamp(k breakerpool.Key, now time.Time) {
	s.setRamp(k, ramp{since: now})
	s.q.m.rampsStarted.Inc()
}

// dropRamp forgets k's ramp, armed or under way, and gives its group its
// configured rate back at once.
func (s *scheduler) dropRamp(k breakerpool.Key, now time.Time) {
	s.rmu.Lock()
	_, had := s.ramps[k]
	delete(s.ramps, k)
	s.rmu.Unlock()
	if !had {
		return
	}
	if g := s.lookup(k); g != nil {
		s.tune(g, s.q.limits.Current(), now, false)
	}
}

// armRamp arms k's ramp (its breaker opened or is probing), if k ramps.
func (s *scheduler) armRamp(k breakerpool.Key, now time.Time) {
	s.setRamp(k, ramp{since: now, armed: true})
}

// setRamp records r for k, when k ramps at all, and retunes its group at
// once, dropping any token saved up.
func (s *scheduler) setRamp(k breakerpool.Key, r ramp) {
	l := s.q.limits.Current()
	rl, ok := l.(RampLimits)
	if !ok || rl.RampDuration(k.NamespaceID, k.Destination) <= 0 {
		return
	}
	s.rmu.Lock()
	s.ramps[k] = r
	s.rmu.Unlock()
	s.kick()
	g := s.lookup(k)
	if g != nil {
		s.tune(g, l, r.since, true)
	}
}

// retune moves ramps to their next stage and applies fleet shares: it
// tunes every group that ramps (or just stopped) or has a fleet budget,
// and forgets ramps that ended. It visits only those groups (the ramps'
// keys and s.budgeted): any other group's rate is its configured one,
// which changes only with the config, and refresh applies that.
func (s *scheduler) retune(now time.Time) {
	l := s.q.limits.Current()
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.rmu.Lock()
	touched := make([]breakerpool.Key, 0, len(s.ramps))
	for k, r := range s.ramps {
		if r.since.After(now) {
			// Started after this tick's time (a close racing the tick, or a
			// tick read late): not ended, the next tick handles it. Without
			// this it read as "from the future", was forgotten, and its group
			// was tuned back to the full rate: no ramp after that close.
			continue
		}
		touched = append(touched, k)
		_, _, _, ok := s.rampOfLocked(l, k, now)
		if !ok || (r.armed && s.groups[k] == nil && now.Sub(r.since) > rampArmTTL) {
			delete(s.ramps, k) // its group is tuned back to the full rate below
		}
	}
	s.rmu.Unlock()
	s.fmu.Lock()
	groups := make([]*group, 0, len(s.budgeted)+len(touched))
	for _, g := range s.budgeted {
		groups = append(groups, g)
	}
	for _, k := range touched {
		if g := s.groups[k]; g != nil && s.budgeted[k] == nil {
			groups = append(groups, g)
		}
	}
	s.fmu.Unlock()
	for _, g := range groups {
		s.tune(g, l, now, false)
	}
}

// rampCount is the number of ramps under way (ended ones go at the next
// retune).
func (s *scheduler) rampCount() int {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	n := 0
	for _, r := range s.ramps {
		if !r.armed {
			n++
		}
	}
	return n
}

// rampLoop retunes every rampTick until Close, while there is a budgeted
// group or a ramp to retune. With neither it waits for the scheduler's
// kick instead of ticking: a ticker's channel that nobody waits on does
// not wake the runtime, and every wake-up of an idle process costs CPU (an
// idle node ticked ten times a second here for nothing).
func (q *Queue) rampLoop() {
	defer q.loopsDone.Done()
	t := time.NewTicker(rampTick)
	defer t.Stop()
	for {
		var tick <-chan time.Time
		if !q.sched.idle() {
			tick = t.C
		}
		select {
		case <-tick:
			q.sched.retune(time.Now()) // not the tick's time, which may be stale
		case <-q.sched.wake:
		case <-q.stop:
			return
		}
	}
}

// Ramp returns k's ramp on this node; ok is false when it is not ramping.
func (q *Queue) Ramp(k breakerpool.Key) (st RampStatus, ok bool) {
	now := time.Now()
	l := q.limits.Current()
	s := q.sched
	s.rmu.Lock()
	rp, d, start, ok := s.rampOfLocked(l, k, now)
	s.rmu.Unlock()
	if !ok || rp.armed {
		return st, false
	}
	since := rp.since
	_, _, target, _ := limitsFor(l, k)
	target, _ = q.fleetRate(l, k, target, 0)
	rps, _, _ := s.rateFor(l, k, now)
	return RampStatus{Since: since, Until: since.Add(d), StartRPS: start, RPS: float64(rps), TargetRPS: float64(target)}, true
}
