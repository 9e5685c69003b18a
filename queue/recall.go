package queue

import (
	"slices"
	"time"

	"fusebox/breakerpool"
)

// Recalling deferred tasks (queue/DESIGN.md, "Readers").
//
// A deferred task (defer.go) waits in the store for the turn its key's pace
// gave it. When the key drains sooner than that — its destination sped up,
// or the shards' estimates erred late — it would sit idle until the turns
// came. So a shard remembers the tasks it deferred, and registers with the
// key's group; when the group's buffer is down to half with no shard
// holding tasks for it (the key's in-memory supply is spent), the group
// tells one registered shard, which reads back its deferred tasks of the
// key in due order (LaterStore), up to the buffer's room, and dispatches
// them before their turn. Nothing is written: a recalled task's next result
// replaces its row as usual, and one released unstarted waits for its turn
// again. Only tasks this shard instance deferred are recalled, never
// another task of the key due later (a retry's backoff is kept).

// recallCapPerWindow bounds the deferred tasks a shard remembers, in
// windows (MaxPendingPerShard): beyond it a deferred task is not
// recallable and comes at its turn.
const recallCapPerWindow = 10

// rememberDeferred records that s deferred id of k, if it has room to
// remember it (s.mu held).
func (s *shard) rememberDeferred(id string) {
	if len(s.deferredIDs) >= recallCapPerWindow*s.q.cfg.MaxPendingPerShard {
		return
	}
	if s.deferredIDs == nil {
		s.deferredIDs = make(map[string]struct{})
	}
	s.deferredIDs[id] = struct{}{}
}

// forgetDeferred forgets id, read as due or recalled (s.mu held).
func (s *shard) forgetDeferred(id string) { delete(s.deferredIDs, id) }

// dropHorizon forgets k's deferral horizon once no task of it needs
// recalling (s.mu held). With no horizon left every deferred task is due,
// so the remembered ids go too: a task deferred and then taken by other
// means (a cancel, a redrive) is never read again by this shard, and its
// id would otherwise stay until the shard closes.
func (s *shard) dropHorizon(k breakerpool.Key) {
	delete(s.deferredTo, k)
	delete(s.recallFrom, k)
	if len(s.deferredTo) == 0 {
		s.deferredIDs = nil
	}
}

// watchDry registers sh to be told when k's group has room and no shard
// holds tasks for it. With no group, or one dry already, sh is told at
// once.
func (s *scheduler) watchDry(k breakerpool.Key, sh *shard) {
	g := s.lookup(k)
	if g == nil {
		dryFor([]*shard{sh})
		return
	}
	g.mu.Lock()
	if !slices.Contains(g.dry, sh) {
		g.dry = append(g.dry, sh)
	}
	dry := g.takeDryLocked()
	g.mu.Unlock()
	dryFor(dry)
}

// nudgeDry tells the next shard waiting for k's group to run dry, if it
// still is: a recall that left room passes it on.
func (s *scheduler) nudgeDry(k breakerpool.Key) {
	g := s.lookup(k)
	if g == nil {
		return
	}
	g.mu.Lock()
	dry := g.takeDryLocked()
	g.mu.Unlock()
	dryFor(dry)
}

// takeDryLocked returns (and forgets) the first shard waiting for the
// group to run dry once its buffer is down to half and no shard holds a
// task it refused: one at a time, so the shards' recalls take turns
// instead of all filling the same room. g.mu must be held.
func (g *group) takeDryLocked() []*shard {
	if len(g.dry) == 0 || len(g.waiting) > 0 || (len(g.buf)-g.head)*2 > g.bufCap {
		return nil
	}
	sh := g.dry[0]
	g.dry = slices.Delete(g.dry, 0, 1)
	return []*shard{sh}
}

// dryFor tells each shard that a key it deferred tasks of ran dry.
func dryFor(shards []*shard) {
	for _, sh := range shards {
		sh.dry.Store(true)
		signal(sh.wake)
	}
}

// recallBackstop marks a key as dry every DeferAfter while this shard has
// deferred tasks to recall (s.mu held, reader only): the walk then reads
// back what each key's buffer and its destination's share have room for,
// and a key with none reads nothing and costs no store read. The signals
// above are edges, one shard told at a time, and an edge can be lost: a
// shard told while its destination's share is full waits for its own end
// below the share and does not pass the turn on, so the other shards
// registered with an idle group wait for a dequeue that does not come;
// and a group removed while idle forgets its registered shards. Their
// deferred tasks then waited for turns that can be minutes away while
// their destination sat idle. With the backstop the wait is at most
// DeferAfter, whatever the edges do.
func (s *shard) recallBackstop(now time.Time) {
	if len(s.deferredTo) == 0 || now.Before(s.recallCheck) {
		return
	}
	s.recallCheck = now.Add(s.q.cfg.DeferAfter)
	s.dry.Store(true)
}

// nextRecallCheck is when the reader should wake for recallBackstop, if it
// has deferred tasks to recall (s.mu held). A check that a read passed
// over (one at capacity, or out of contact) is looked at DeferAfter from
// now, not at once: waking at a past time would spin.
func (s *shard) nextRecallCheck(now time.Time) (time.Time, bool) {
	if len(s.deferredTo) == 0 {
		return time.Time{}, false
	}
	if at := s.recallCheck; at.After(now) {
		return at, true
	}
	return now.Add(s.q.cfg.DeferAfter), true
}

// recallRoom is how many tasks k's buffer can take now: its free capacity,
// or a whole buffer when k has no group.
func (s *scheduler) recallRoom(k breakerpool.Key) int {
	g := s.lookup(k)
	if g == nil {
		bufCap, _, _, _ := limitsFor(s.q.limits.Current(), k)
		return bufCap
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) > 0 {
		return 0
	}
	return g.bufCap - (len(g.buf) - g.head)
}

// readRecalls reads back, when a key this shard deferred tasks of ran dry,
// up to limit of those tasks due before their turn (s.mu held, after the
// due read). A key whose walk reached its latest turn is done; one with
// more to recall waits for the next time its group runs dry.
func (s *shard) readRecalls(now time.Time, limit int, skip func(string) bool) []*item {
	ls, ok := s.q.store.(LaterStore)
	if !ok || len(s.deferredTo) == 0 || !s.dry.Swap(false) {
		return nil
	}
	skipRecall := func(id string) bool { // not deferred here, or in flight
		_, deferred := s.deferredIDs[id]
		return !deferred || skip(id)
	}
	var items []*item
	var shareRoom map[string]int // what each destination's share has left for this pass's recalls
	for k, until := range s.deferredTo {
		if !until.After(now) {
			// Every task deferred to it is due: the due reads take them.
			s.dropHorizon(k)
			continue
		}
		room, ok := shareRoom[k.Destination]
		if !ok {
			room = s.shareRoom(k.Destination)
		}
		if room <= 0 {
			// Its destination has its share dispatched: the first of its
			// tasks to end below it wakes this shard (share.go).
			s.atShare(k.Destination)
			continue
		}
		n := min(limit, s.q.sched.recallRoom(k), room)
		if n <= 0 {
			s.q.sched.watchDry(k, s)
			continue
		}
		from := s.recallFrom[k]
		if from.At.Before(now) {
			from = Cursor{At: now}
		}
		tasks, last, done := s.later(ls, k, from, until, n, skipRecall)
		for i := range tasks {
			it := newItem(tasks[i], s, nil)
			s.track(it)
			s.forgetDeferred(tasks[i].ID)
			items = append(items, it)
		}
		limit -= len(tasks)
		if shareRoom == nil {
			shareRoom = make(map[string]int)
		}
		shareRoom[k.Destination] = room - len(tasks)
		if len(tasks) < n {
			// Room left: the next shard that deferred tasks of k may
			// fill it.
			s.q.sched.nudgeDry(k)
		}
		if done {
			if s.written < s.deferMark {
				// Deferrals not yet written are still in flight here,
				// due at their old time, and the walk passed over them:
				// walk again from now once they are (the flusher wakes
				// the reader after each write).
				delete(s.recallFrom, k)
				s.dry.Store(true)
				continue
			}
			// Every task deferred up to the latest turn is recalled:
			// the next burst's deferrals start from now.
			s.dropHorizon(k)
			continue
		}
		if s.recallFrom == nil {
			s.recallFrom = make(map[breakerpool.Key]Cursor)
		}
		if len(tasks) > 0 {
			s.recallFrom[k] = last
		}
		s.q.sched.watchDry(k, s)
	}
	if len(items) > 0 {
		s.q.m.recalled.Add(float64(len(items)))
	}
	return items
}

// later is ls.Later for this shard, bounded by the shard's read context
// when the store takes one (ContextWalkStore).
func (s *shard) later(ls LaterStore, k breakerpool.Key, after Cursor, until time.Time, limit int, skip func(string) bool) ([]Task, Cursor, bool) {
	if cs, ok := ls.(ContextWalkStore); ok {
		return cs.LaterContext(s.rctx, s.id, k, after, until, limit, skip)
	}
	return ls.Later(s.id, k, after, until, limit, skip)
}
