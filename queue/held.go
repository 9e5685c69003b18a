package queue

import (
	"time"

	"fusebox/breakerpool"
)

// heldTasks are tasks a full group buffer refused, by key, each key's in the
// order they were read. A key's tasks are offered again in that order, and
// only until the buffer refuses one: the rest wait for the group's next room
// signal without being offered (shard.dispatch).
//
// They were one list offered whole on every room signal. A buffer that
// drains to half wakes every shard waiting on it, so each signal walked
// every waiting shard's whole list, offering (and keying) each task only to
// have the buffer refuse it again: at 256 shards and 100,000 tasks, 17
// refusals per delivered task, 7 % of the cluster's CPU in the readers'
// dispatch (docs/benchmarks.md, "Thirtieth session").
type heldTasks struct {
	byKey map[breakerpool.Key][]*item
	n     int
}

// len is the number of tasks held.
func (h *heldTasks) len() int { return h.n }

// has reports whether tasks of k are held.
func (h *heldTasks) has(k breakerpool.Key) bool {
	_, ok := h.byKey[k]
	return ok
}

// add holds it behind its key's held tasks.
func (h *heldTasks) add(it *item) {
	h.put(it.key, it)
}

// put holds its behind k's held tasks, in order.
func (h *heldTasks) put(k breakerpool.Key, its ...*item) {
	if len(its) == 0 {
		return
	}
	if h.byKey == nil {
		h.byKey = make(map[breakerpool.Key][]*item)
	}
	if q, ok := h.byKey[k]; ok {
		h.byKey[k] = append(q, its...)
	} else {
		h.byKey[k] = its // no copy: its is the caller's to give (a retried list's tail, or new)
	}
	h.n += len(its)
}

// merge holds every task of o behind this set's tasks of its key.
func (h *heldTasks) merge(o heldTasks) {
	for k, its := range o.byKey {
		h.put(k, its...)
	}
}

// dispatch offers the held tasks in retry, each key's in order until its
// buffer refuses one, then items in order; what is refused is held (see
// heldTasks). An item whose key already has tasks held is held behind them
// without being offered: its buffer refused the last offer, and the group's
// room signal (roomFor) wakes this shard to offer them again, in order. A
// task whose destination has its share of the shard dispatched is held
// without an offer too; the first of its dispatched tasks to end below the
// share wakes the shard (share.go). It reports whether any task is held
// after it.
func (s *shard) dispatch(retry heldTasks, items []*item, now time.Time) (refused bool) {
	var held heldTasks
	for k, its := range retry.byKey {
		for i, it := range its {
			if taken, _ := s.offer(it, now); !taken {
				clear(its[:i]) // the taken ones: not kept alive by the rest's array
				held.put(k, its[i:]...)
				break
			}
		}
	}
	full, shared := 0, 0 // newly held, counted once each
	for _, it := range items {
		if held.has(it.key) || s.held.has(it.key) {
			held.add(it)
			full++
			continue
		}
		switch taken, atShare := s.offer(it, now); {
		case taken:
		case atShare:
			held.add(it)
			shared++
		default:
			held.add(it)
			full++
		}
	}
	if full > 0 {
		s.q.m.rejections.WithLabelValues("buffer_full").Add(float64(full))
	}
	if shared > 0 {
		s.q.m.rejections.WithLabelValues("destination_share").Add(float64(shared))
	}
	if held.len() == 0 {
		return false
	}
	s.mu.Lock()
	if s.held.len() == 0 {
		s.heldUntil = now.Add(s.q.cfg.RejectRetry)
	}
	s.held.merge(held)
	s.mu.Unlock()
	return true
}

// offer offers it to its group unless its destination is at its share
// (atShare); taken reports whether the group took it.
func (s *shard) offer(it *item, now time.Time) (taken, atShare bool) {
	s.mu.Lock()
	ok := s.tryOut(it, now)
	s.mu.Unlock()
	if !ok {
		return false, true
	}
	s.offers.Add(1)
	if !s.q.sched.submit(it) {
		s.notOut(it)
		return false, false
	}
	return true, false
}
