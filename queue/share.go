package queue

import (
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
)

// A destination's share of a shard's window (queue/DESIGN.md, "A
// destination's share of the window").
//
// A key is (task group, namespace, destination), and each key may have its
// concurrency in calls and its buffer queued: 200 tasks with the defaults.
// Many namespaces calling one slow host could so fill a shard's window
// (MaxPendingPerShard) with tasks that were dispatched, not held, and
// deferral (defer.go), which writes back held tasks only, had nothing to
// take out: every other destination of the shard waited until those calls
// ended (2.8 s behind ten namespaces on a host that hung, 5.8 s behind ten
// on one that answered in 1 s: the isolation review). Temporal's queues
// meet the same shape with their pending-task alert, which moves the
// namespaces with the most pending tasks to a slower reader.
//
// Here a destination, whatever its namespaces, may have at most
// DestinationShare of a shard's tasks dispatched (half the window by
// default). A task beyond it is held, not offered (counted as
// destination_share). Once the window is full, a held task of a slow
// destination at its share (slowAt: its calls take DeferAfter/
// slowCallFraction or more) whose turn at the destination's pace is further
// than that is written back due at its turn, not before DeferAfter, as a
// saturated key's are (deferShares); the first of the destination's tasks to
// end below its share recalls it earlier (recall.go). The window then keeps
// room for the shard's other destinations. A destination whose calls are
// fast is never deferred for its share, so a shard that calls one fast host
// can fill its whole window (half dispatched, half held) without a write.
//
// Not shared: the window itself. A shard whose due tasks are all one slow
// destination's defers them as they come due, one write each; and the
// other destinations' tasks due after a slow host's backlog are read once
// that backlog is deferred, at most DeferAfter after the host's calls
// stopped ending (a host that answers nothing) — not, as before, when its
// calls time out or its backlog drains.

// destLoad is one destination's tasks in one shard's window (under the
// shard's mu).
type destLoad struct {
	name string
	// refs counts the shard's in-flight items of the destination.
	refs int
	// out counts those dispatched: taken by a group and not yet finished
	// or released. lastOut is the time of the latest dispatch (ns).
	out     int64
	lastOut int64
	// lifetime and callTime are moving averages (ns) of a dispatched
	// task's time from dispatch to end, and of its call's, for the tasks
	// that made one.
	lifetime, callTime float64
	// waiting is set when a task was held, or a recall skipped, because
	// out was at the share: the first end below it wakes the reader.
	waiting bool
}

// track enters it into the shard's window (s.mu held).
func (s *shard) track(it *item) {
	s.inflight[it.task.ID] = it
	d := s.dests[it.key.Destination]
	if d == nil {
		if s.dests == nil {
			s.dests = make(map[string]*destLoad)
		}
		d = &destLoad{name: it.key.Destination}
		s.dests[d.name] = d
	}
	d.refs++
	it.dl = d
}

// untrack takes it out of the shard's window (s.mu held).
func (s *shard) untrack(it *item) {
	delete(s.inflight, it.task.ID)
	if d := it.dl; d != nil {
		if d.refs--; d.refs == 0 && s.dests[d.name] == d {
			delete(s.dests, d.name)
		}
	}
}

// share is how many of a shard's tasks one destination may have dispatched.
func (s *shard) share() int64 { return int64(s.q.cfg.DestinationShare) }

// tryOut counts it as dispatched unless its destination is at its share
// (s.mu held). It is counted before the offer, since a worker may end it
// before submit returns; notOut undoes a refused offer.
func (s *shard) tryOut(it *item, now time.Time) bool {
	d := it.dl
	if d.out >= s.share() {
		d.waiting = true
		return false
	}
	d.out++
	d.lastOut = now.UnixNano()
	it.outAt = d.lastOut
	return true
}

// notOut undoes tryOut for an offer the group refused.
func (s *shard) notOut(it *item) {
	s.mu.Lock()
	it.dl.out--
	it.outAt = 0
	s.belowShare(it.dl)
	s.mu.Unlock()
}

// endOut ends it's dispatch, folding its times into the destination's
// averages (s.mu held). The first end below the share of a destination
// whose tasks waited wakes the reader to offer them (and to recall deferred
// ones).
func (s *shard) endOut(it *item, now time.Time) {
	if it.outAt == 0 {
		return
	}
	d := it.dl
	d.out--
	d.lifetime = movingAverage(d.lifetime, now.UnixNano()-it.outAt)
	if it.callAt != 0 {
		d.callTime = movingAverage(d.callTime, now.UnixNano()-it.callAt)
	}
	it.outAt, it.callAt = 0, 0
	s.belowShare(d)
}

// belowShare wakes the reader when d's tasks waited for its share and it
// has room again (s.mu held).
func (s *shard) belowShare(d *destLoad) {
	if d.waiting && d.out < s.share() {
		d.waiting = false
		s.room.Store(true)
		s.dry.Store(true)
		signal(s.wake)
	}
}

// movingAverage folds a sample of ns into avg (0: none yet), about the last
// eight samples counting (callTimeWeight); a group's call time too.
func movingAverage(avg float64, ns int64) float64 {
	x := float64(max(ns, 1))
	if avg == 0 {
		return x
	}
	return avg + callTimeWeight*(x-avg)
}

// atShare marks dest's tasks as waiting for its share (s.mu held): a
// recall of its deferred tasks waits for the first end below it.
func (s *shard) atShare(dest string) {
	if d := s.dests[dest]; d != nil {
		d.waiting = true
	}
}

// maxShareAhead bounds a turn deferShares gives from the age of a
// destination's calls, in DeferAfters from now (10 s by default).
const maxShareAhead = 5

// slowAt is the time d's dispatched tasks take, when it is long enough to
// defer for (0 when not): the longer of its calls' average and, while it is
// at its share, the age of its latest dispatch (every task dispatched then
// is at least that old, as for callTimeAt), if that is keep or more. A
// destination whose calls are fast is never deferred for its share: its
// tasks leave the window as fast as they come, and on a node that is itself
// the bottleneck a long time from dispatch to end is the node's queueing,
// which writes would only lengthen. Before any of its calls has ended the
// age alone is a measure only from measureAfter on: a turn from a younger
// age would err early, and a task read back while its destination is still
// at its share is deferred again.
//
// byAge reports that the age set it: the destination is not answering at
// the pace its calls had, and a pace from an age only falls while it waits.
func (d *destLoad) slowAt(now time.Time, share int64, keep, measureAfter time.Duration) (t float64, byAge bool) {
	t = d.callTime
	if d.out >= share {
		age := float64(now.UnixNano() - d.lastOut)
		if d.callTime == 0 && age < float64(measureAfter) {
			return 0, false
		}
		byAge = age > t
		t = max(t, age)
	}
	if t < float64(keep) {
		return 0, false
	}
	return max(t, d.lifetime), byAge
}

// deferShares picks, once the window is full, the held tasks of each
// destination at its share whose turn at the destination's pace (behind its
// other held tasks) is further than DeferAfter/slowCallFraction, and removes
// them from held; the caller writes them back due at their turns (s.mu
// held). Exempt, as in deferSaturated: a released blocked task, one with an
// interrupted attempt, and every task of a key whose breaker is not closed.
func (s *shard) deferShares(now time.Time, out []deferral) []deferral {
	q := s.q
	keep := q.cfg.DeferAfter / slowCallFraction
	ahead := map[*destLoad]int{}
	for k, its := range s.held.byKey {
		d := s.dests[k.Destination]
		if d == nil || d.out < s.share() || q.breakers.Breaker(k).State() != gobreaker.StateClosed {
			continue
		}
		t, byAge := d.slowAt(now, s.share(), keep, q.cfg.DeferAfter)
		if t == 0 {
			continue
		}
		// Its pace out of the shard is its share over that time (Little's
		// law): one task every step.
		step := time.Duration(t / float64(s.share()))
		kept := its[:0:0]
		for _, it := range its {
			ahead[d]++
			turn := time.Duration(ahead[d]) * step
			if turn <= keep || it.rel != nil || it.task.AttemptEpoch != 0 {
				kept = append(kept, it)
				continue
			}
			// Not before DeferAfter: an estimate made before the first
			// of the destination's tasks ended (the age of its latest
			// dispatch) errs early, and a task read back while its
			// destination is still at its share is deferred again. Late
			// costs nothing where the store can recall: the first end
			// below the share reads deferred tasks back (recall.go).
			at := now.Add(max(turn, q.cfg.DeferAfter))
			if last := s.shareTurns[d.name]; !at.After(last) {
				at = last.Add(step)
			}
			// A pace from the age of its calls (a destination that has
			// stopped answering) falls as they wait, and each task read
			// back too early goes after the turns given before, so the
			// turns ran on while it hung. A recall brings them back when
			// it answers again, but only on this shard instance: after a
			// move they waited for turns that had run past its recovery.
			// Such turns are never further than maxShareAhead.
			if lim := now.Add(maxShareAhead * q.cfg.DeferAfter); byAge && at.After(lim) {
				at = lim
			}
			if s.shareTurns == nil {
				s.shareTurns = make(map[string]time.Time)
			}
			s.shareTurns[d.name] = at
			if at.After(s.deferredTo[k]) {
				if s.deferredTo == nil {
					s.deferredTo = make(map[breakerpool.Key]time.Time)
				}
				s.deferredTo[k] = at
			}
			s.rememberDeferred(it.task.ID)
			out = append(out, deferral{it, at})
		}
		if len(kept) == len(its) {
			continue
		}
		q.sched.watchDry(k, s) // recall.go
		s.held.n -= len(its) - len(kept)
		if len(kept) == 0 {
			delete(s.held.byKey, k)
		} else {
			s.held.byKey[k] = kept
		}
	}
	for name, at := range s.shareTurns {
		if !at.After(now) {
			delete(s.shareTurns, name)
		}
	}
	return out
}

// shareRoom is how many more tasks dest may have dispatched (s.mu held).
func (s *shard) shareRoom(dest string) int {
	d := s.dests[dest]
	if d == nil {
		return int(s.share())
	}
	return int(max(s.share()-d.out, 0))
}
