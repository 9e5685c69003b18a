package queue

import (
	"math"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"fusebox/breakerpool"
)

// Deferring held tasks of a saturated key (queue/DESIGN.md, "Readers").
//
// A shard's window (MaxPendingPerShard) counts the tasks it holds, and its
// reader reads in due order. A key whose tasks come due faster than its rate
// limit lets them out fills the window with held tasks, and the shard's other
// keys' tasks due after them were not read until that backlog had drained to
// a window: one destination's burst held back every other destination of its
// shards. So when the window is full, a held task of a saturated key whose
// turn is more than DeferAfter away is written back (a pending result: no
// attempt counted, its message and counters unchanged) due at its estimated
// turn. It leaves the window and the due range until then, at the cost of one
// result write; if the key drains sooner, the shard recalls it (recall.go).
// A key's pace is the lower of its rate limit and what its concurrency lets
// through at its calls' measured time (pace), so a slow destination with no
// rate limit is deferred too, as is one whose calls have not ended yet but
// have every slot busy for long (callTimeAt). A key that admits nothing
// (rate 0) is not deferred: there is no turn to estimate. Nor is a key whose
// breaker is not closed: its held tasks reach the breaker as fast as its
// workers take them (the breaker is asked before the rate limiter) and are
// refused and written back at their turn (blockedTurn), one write each.
// Deferred first, they were written back, recalled at once (a key that
// refuses everything runs dry at once) and refused: two writes each, and
// right after a dead destination's backlog was first read, 230 to 1,147
// writes a second where its rate is 235 (BenchmarkDeadBacklog, node/).

// slowCallFraction: the concurrency bound of a key's pace counts once its
// calls take DeferAfter/slowCallFraction or more (pace).
const slowCallFraction = 10

// callTimeWeight is the weight of a call's duration in its group's moving
// average: about the last eight calls count.
const callTimeWeight = 1.0 / 8

// startCall and endCall bracket each call: endCall folds its duration into
// g's moving average.
func (g *group) startCall(at time.Time) {
	g.lastCall.Store(at.UnixNano())
	g.inCall.Add(1)
}

func (g *group) endCall(start time.Time) {
	g.inCall.Add(-1)
	g.observeCall(time.Since(start))
}

// callTimeAt is the call time pace divides the concurrency by: the moving
// average of the calls that ended, or, while every slot is busy, the age of
// the youngest call under way if that is longer. No slot has freed since
// that call began (a freed slot would be free or taken by a younger call),
// so every call under way has taken at least that long. Without it a
// destination that answers nothing had no pace until its first call ended
// (at its request timeout: 10 s by default), and one that slowed down
// mid-burst kept the pace of its earlier, faster calls until eight slow
// ones had ended.
func (g *group) callTimeAt(now time.Time, conc int) float64 {
	ct := math.Float64frombits(g.callTime.Load())
	if int(g.inCall.Load()) >= conc {
		ct = max(ct, float64(now.UnixNano()-g.lastCall.Load()))
	}
	return ct
}

// observeCall folds a call's duration into g's moving average.
func (g *group) observeCall(d time.Duration) {
	for {
		old := g.callTime.Load()
		avg := movingAverage(math.Float64frombits(old), int64(d)) // share.go
		if g.callTime.CompareAndSwap(old, math.Float64bits(avg)) {
			return
		}
	}
}

// pace reports k's group's rate (tasks a second), the tasks queued in its
// buffer and the shards waiting for room in it; ok is false when k has no
// group. The rate is the lower of two bounds:
//   - the rate limit: the higher of the limiter's (a recovery ramp or a
//     fleet share may hold it lower for a while) and the configured one. An
//     estimate that errs early brings a deferred task back to be held or
//     deferred again; one that errs late would leave the rate unused as a
//     ramp rises.
//   - the concurrency: conc calls in flight at the calls' time (Little's
//     law; callTimeAt). A destination that answers in 5 s with 100 calls in
//     flight takes 20 a second, whatever its rate limit allows. It errs
//     late when the destination speeds up during the burst (recall.go then
//     reads the deferred tasks back). It counts only for calls slower than
//     DeferAfter/slowCallFraction (200 ms by default): a faster call's time
//     on a busy node is mostly the node's own scheduling, and deferring on
//     it adds writes and reads to a node that is itself the bottleneck (a
//     third of a 100,000-task backlog for one loopback destination was
//     deferred, at 5–25 % more CPU per task, queue/DESIGN.md).
func (s *scheduler) pace(k breakerpool.Key) (rps float64, queued, waiting int, ok bool) {
	g := s.lookup(k)
	if g == nil {
		return 0, 0, 0, false
	}
	rps, queued, waiting = s.paceOf(g)
	return rps, queued, waiting, true
}

// paceOf is pace for k's group g.
func (s *scheduler) paceOf(g *group) (rps float64, queued, waiting int) {
	k := g.key
	g.mu.Lock()
	queued, waiting, conc := len(g.buf)-g.head, len(g.waiting), g.conc
	g.mu.Unlock()
	_, _, configured, _ := limitsFor(s.q.limits.Current(), k)
	rps = max(float64(g.lim.Limit()), float64(configured))
	if ct := g.callTimeAt(time.Now(), conc); ct > 0 && ct >= float64(s.q.cfg.DeferAfter/slowCallFraction) {
		rps = min(rps, float64(conc)*float64(time.Second)/ct)
	}
	return rps, queued, waiting
}

// blockedTurn is when a task that k's open breaker refused at now comes
// due again: d (blockedDelay) after its turn, the turns of the refused
// tasks of k's destination on this node following each other one turn of
// their key's pace (1/rps) apart and none before now. The turns are the
// destination's, not the key's: a key is (task group, namespace,
// destination), and with a sequence per key one dead host called from 16
// namespaces was rewritten 16 times as fast (1,597 result writes a second
// against 100 for one namespace; 3,197 a second on one node from 32,
// every replica applying each: the isolation review), taken from every
// other destination's write budget. Sharing a sequence delays no
// recovery on this node: a closing breaker releases its key's blocked
// tasks whatever their turns (below). Without turns every refused task came due d
// later, at the breaker's next probe or its gentle backoff, so a dead
// destination's whole backlog was read, refused and rewritten once per
// such round: a million pending tasks, a million result writes every
// minute or five, more than a cluster's write budget, taken from every
// other destination (docs/architecture.md, "What a dead destination
// costs"). With turns the refused tasks come due no faster than the key
// could take them once it recovers, in the order they were refused, and
// each round rewrites what the key's rate would deliver (a 100 calls/s
// key: about 100 writes a second, whatever its backlog). A small backlog
// keeps its delays, jitter included (turns of a few milliseconds).
// Recovery is not slowed: when the breaker closes, every blocked task of
// the key is released at once (release.go), whatever its due time. A key
// with no rate bound (rate.Inf) or no group keeps now + d; a turn is at
// most maxBlockedTurn.
func (s *scheduler) blockedTurn(k breakerpool.Key, now time.Time, d time.Duration) time.Time {
	g := s.lookup(k)
	if g == nil {
		return now.Add(d)
	}
	rps, _, _ := s.paceOf(g)
	if !(rps > 0) || rps >= float64(rate.Inf) {
		return now.Add(d)
	}
	step := time.Duration(min(float64(time.Second)/rps, float64(maxBlockedTurn)))
	s.tmu.Lock()
	turn := s.turns[k.Destination].Add(step)
	if turn.Before(now) {
		turn = now
	}
	s.turns[k.Destination] = turn
	s.tmu.Unlock()
	return turn.Add(d)
}

// maxBlockedTurn bounds one turn of blockedTurn: a rate limit set near zero
// would otherwise make it overflow a Duration.
const maxBlockedTurn = time.Hour

// deferral is a held task to write back due at.
type deferral struct {
	it *item
	at time.Time
}

// deferSaturated writes back, when the shard's window is full, the held tasks
// of saturated keys (pace) whose turn is more than DeferAfter away. The reader
// calls it after dispatch.
func (s *shard) deferSaturated(now time.Time) {
	q := s.q
	s.mu.Lock()
	if s.held.len() == 0 || len(s.inflight)+len(s.parked) < q.cfg.MaxPendingPerShard {
		s.mu.Unlock()
		return
	}
	var out []deferral
	for k, at := range s.deferredTo {
		if !at.After(now) {
			s.dropHorizon(k) // recall.go
		}
	}
	for k, its := range s.held.byKey {
		rps, queued, waiting, ok := q.sched.pace(k)
		if !ok || !(rps > 0) || rps >= float64(rate.Inf) || q.breakers.Breaker(k).State() != gobreaker.StateClosed {
			continue
		}
		// The key's tokens are shared by the shards waiting on its buffer,
		// whose held tasks take turns with this shard's.
		step := time.Duration(float64(time.Second) * float64(max(1, waiting)) / rps)
		turn := time.Duration(float64(queued) / rps * float64(time.Second))
		kept := its[:0:0]
		for _, it := range its {
			if turn <= q.cfg.DeferAfter || it.rel != nil || it.task.AttemptEpoch != 0 {
				// Soon enough; or a released blocked task (its walk counts
				// it) or one with an interrupted attempt (redelivery.go
				// reads its epoch): kept.
				kept = append(kept, it)
				turn += step
				continue
			}
			// After the tasks deferred before it, which come due at their
			// own turns: deferred once, not again every time the window
			// fills with the same burst.
			at := now.Add(turn)
			if last := s.deferredTo[k]; !at.After(last) {
				at = last.Add(step)
			}
			if s.deferredTo == nil {
				s.deferredTo = make(map[breakerpool.Key]time.Time)
			}
			s.deferredTo[k] = at
			s.rememberDeferred(it.task.ID)
			out = append(out, deferral{it, at})
			turn += step
		}
		if len(kept) == len(its) {
			continue
		}
		s.q.sched.watchDry(k, s) // recall.go
		s.held.n -= len(its) - len(kept)
		if len(kept) == 0 {
			delete(s.held.byKey, k)
		} else {
			s.held.byKey[k] = kept
		}
	}
	out = s.deferShares(now, out) // share.go
	if len(out) > 0 && !s.recallCheck.After(now) {
		// The recall backstop's first look, DeferAfter after this (an
		// earlier one would read back what was just written: recall.go).
		s.recallCheck = now.Add(q.cfg.DeferAfter)
	}
	s.mu.Unlock()
	if len(out) == 0 {
		return
	}
	q.m.results.WithLabelValues(outcomeDeferred).Add(float64(len(out)))
	for _, d := range out {
		t := &d.it.task
		s.finish(d.it, Result{
			TaskID: t.ID, Status: StatusPending, Attempts: t.Attempts, Blocked: t.Blocked, Unexpected: t.Unexpected,
			NextAttemptAt: d.at, Message: t.Message, HTTPStatus: t.HTTPStatus,
		})
	}
	s.mu.Lock()
	s.deferMark = s.finished // a recall walks again until these are written (recall.go)
	s.mu.Unlock()
}
