package queue

import (
	"strconv"
	"time"

	"fusebox/breakerpool"

	"github.com/sony/gobreaker/v2"
)

// The shard reader: one goroutine per owned shard that loads due tasks and
// hands them to the scheduler. See DESIGN.md, "Readers".

const (
	// cursorLag re-reads the tasks due shortly before a destination's
	// cursor: a new task is due at its submit stamp, and submits commit out
	// of stamp order (a batch forwarded or retried commits after
	// later-stamped ones; a node's clock is behind). Tasks in flight in
	// that window are skipped, so the lag's cost is the window's tasks per
	// read.
	cursorLag = 250 * time.Millisecond
	// fullReadEvery bounds how long a task due before cursor-cursorLag can
	// wait to be read. Measured: under bulk submits with a dead destination
	// slowing commits, new tasks commit up to ~400 ms out of stamp order;
	// with a 1 s backstop the healthy destination kept 0.38 of its
	// throughput, with 100 ms 0.99. A full read walks the destination's
	// pending tasks once, so ten a second is cheap next to one per wake.
	fullReadEvery = 100 * time.Millisecond
	// deferRecheck bounds how long a destination passed over for an open
	// breaker waits to be looked at again: the breaker can close before
	// its deadline (an operator's auto, a peer's recovery hint).
	deferRecheck = time.Second
)

// destRead is the reader's position in one destination's due tasks.
type destRead struct {
	cursor     time.Time // latest due time loaded
	lastFull   time.Time // last read from the destination's first due task
	cursorRead bool      // the last read started at the cursor: a full read is due by lastFull+fullReadEvery
}

// parkedTask is a task the scheduler's full buffer refused: it is not
// offered again before at.
type parkedTask struct {
	at  time.Time
	key breakerpool.Key
}

// readLoop loads due tasks and hands them to the scheduler, then sleeps
// until the next due time, a store change, an in-flight task leaving, a
// limit change or a deferred destination's recheck — never polling.
func (s *shard) readLoop() {
	defer close(s.readerDone)
	sub, unsubscribe := s.q.store.Subscribe()
	defer unsubscribe()
	paused := false
	defer func() {
		if paused {
			s.q.paused.Add(-1)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-s.stopRead:
			return
		default:
		}
		s.wakeups.Add(1)
		bs := s.q.limits.Current().BatchSize()
		if (bs <= 0) != paused {
			paused = bs <= 0
			if paused {
				s.q.paused.Add(1)
			} else {
				s.q.paused.Add(-1)
			}
		}
		var wakeAt time.Time
		if !paused {
			more, now := s.readBatch(bs)
			if more {
				continue
			}
			wakeAt = s.nextWake(now)
		}
		timer.Stop()
		var tc <-chan time.Time
		if !wakeAt.IsZero() {
			timer.Reset(time.Until(wakeAt))
			tc = timer.C
		}
		select {
		case <-s.stopRead:
			return
		case <-sub:
		case <-s.wake:
		case <-tc:
		}
	}
}

// readBatch loads and dispatches up to bs due tasks, taking the shard's
// destinations in turn (a fair share each, the starting one rotating) and
// passing over a destination whose breaker is open: its tasks are neither
// read nor rewritten until the breaker probes, so a dead destination
// costs nothing here whatever its backlog. A half-open destination gets
// one task per read, its probe. more is true when some destination filled
// its share, so more may be due at once.
func (s *shard) readBatch(bs int) (more bool, now time.Time) {
	q := s.q
	now = time.Now()
	dests := q.store.Destinations(s.id)
	s.mu.Lock()
	for id, p := range s.parked {
		if !p.at.After(now) {
			delete(s.parked, id)
			s.rescan[p.key] = true
		}
	}
	limit := min(bs, q.cfg.MaxPendingPerShard-len(s.inflight)-len(s.parked))
	if limit <= 0 {
		s.mu.Unlock()
		return false, now
	}
	s.reads.Add(1)

	s.deferWake = time.Time{}
	s.active = s.active[:0]
	probes := map[breakerpool.Key]bool{}
	for _, k := range dests {
		st, open := q.breakerState(k)
		if open > 0 {
			if w := now.Add(min(open, deferRecheck)); s.deferWake.IsZero() || w.Before(s.deferWake) {
				s.deferWake = w
			}
			continue
		}
		probes[k] = st != gobreaker.StateClosed // half-open, or open with its deadline just passed
		s.active = append(s.active, k)
	}
	if len(s.dests) > len(dests) { // forget destinations with nothing pending
		has := make(map[breakerpool.Key]bool, len(dests))
		for _, k := range dests {
			has[k] = true
		}
		for k := range s.dests {
			if !has[k] {
				delete(s.dests, k)
			}
		}
	}

	skip := func(id string) bool {
		_, busy := s.inflight[id]
		_, parked := s.parked[id]
		return busy || parked
	}
	var items []*item
	remaining := limit
	share := max(1, limit/max(1, len(s.active)))
	s.rr++
	for i := range s.active {
		if remaining == 0 {
			more = true
			break
		}
		k := s.active[(s.rr+i)%len(s.active)]
		d := s.dests[k]
		if d == nil {
			d = &destRead{}
			s.dests[k] = d
		}
		var from time.Time
		if s.rescan[k] || d.cursor.IsZero() || now.Sub(d.lastFull) >= fullReadEvery {
			d.lastFull = now
			delete(s.rescan, k)
		} else {
			from = d.cursor.Add(-cursorLag)
		}
		d.cursorRead = !from.IsZero()
		n := min(share, remaining)
		if probes[k] {
			n = 1
		}
		tasks := q.store.Due(s.id, k, from, now, n, skip)
		for j := range tasks {
			it := &item{task: tasks[j], sh: s}
			items = append(items, it)
			s.inflight[tasks[j].ID] = it
			if at := tasks[j].NextAttemptAt; at.After(d.cursor) {
				d.cursor = at
			}
		}
		remaining -= len(tasks)
		if len(tasks) == n && !probes[k] {
			more = true
		}
	}
	s.mu.Unlock()
	for _, it := range items {
		if !q.sched.submit(it) {
			q.m.rejections.WithLabelValues("buffer_full").Inc()
			s.mu.Lock()
			delete(s.inflight, it.task.ID)
			s.parked[it.task.ID] = parkedTask{at: now.Add(q.cfg.RejectRetry), key: it.task.Key()}
			s.rescan[it.task.Key()] = true
			s.mu.Unlock()
		}
	}
	q.m.depth.WithLabelValues(strconv.Itoa(s.id)).Set(float64(q.store.Backlog(s.id)))
	return more, now
}

// nextWake is the earliest of the read destinations' next due task and
// backstop read, the next parked expiry and the recheck of destinations
// passed over for an open breaker; zero when there is none.
func (s *shard) nextWake(now time.Time) time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, k := range s.active {
		if at, ok := s.q.store.NextDue(s.id, k, now); ok {
			earlier(at)
		}
		if d := s.dests[k]; d != nil && d.cursorRead { // the backstop full read
			earlier(d.lastFull.Add(fullReadEvery))
		}
	}
	earlier(s.deferWake)
	s.mu.Lock()
	for _, p := range s.parked {
		earlier(p.at)
	}
	s.mu.Unlock()
	return next
}
