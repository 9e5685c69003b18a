package queue

import (
	"time"
)

// Redeliveries (DESIGN.md, "Interrupted attempts"). A call in flight when
// its shard changes hands — the owner crashed, paused past its lease, or
// lost the shard alive — may have reached the destination, and the next
// owner makes it again. The node that loses a shard alive counts what it
// abandons (fusebox_queue_abandoned_calls_total); a crashed node counts
// nothing, and its counters die with it. So each attempt still under way
// at the first result write one FlushInterval after it began leaves a
// start marker in the task table (Result.Started: the task's AttemptEpoch
// becomes the writer's epoch); any later result clears it. A new owner
// that reads a task whose AttemptEpoch is below its own epoch knows an
// attempt began under an earlier owner and never recorded an answer: it
// counts it once (fusebox_queue_interrupted_attempts_total) and delivers
// it again.
//
// What it cannot see: a call that began less than two flushes (a marker
// waits for a call one FlushInterval old, then for the next flush, plus
// the write) before the crash, whose marker was never written; a call
// that ended just before the crash with its result unwritten, when the
// marker was dropped because the call had ended by the flush. A marker
// also cannot tell whether the destination received the call: it counts
// possible duplicates.

// startMark is a call noted by markStarted: the item and when its call
// began.
type startMark struct {
	it *item
	at time.Time
}

// markStarted notes that its attempt has just begun: a flush writes its
// start marker if the call is still under way by then and began at least
// one FlushInterval before (takeMarks). Marks wait beside the results
// (s.marks), so they never make a flush come early nor fill a batch on
// their own. It reports false, marking nothing, when the call must not
// start: the shard is lost, or its ownership is no longer current
// (Queue.current, which attempt checked at admission). Between the two a
// call can wait: for s.mu, held by a release walk's read the database does
// not answer, or for a CPU. A call admitted before a due read the database
// never answered went out after that read's timeout, after its shard had
// moved (TestPostgresUnreachableFromOneNode, when due reads were made under
// s.mu); checking only after a wait for s.mu still let one out
// (TestCallWaitingBehindASlowWalkIsNotMadeAfterTheMove under load).
func (s *shard) markStarted(it *item) bool {
	now := time.Now()
	s.mu.Lock()
	if s.lost || !s.q.current(s) {
		s.mu.Unlock()
		return false
	}
	s.marks = append(s.marks, startMark{it: it, at: now})
	s.mu.Unlock()
	signal(s.kick)
	return true
}

// takeMarks returns the start markers (at most max) of the marked calls
// still under way that began at least one FlushInterval before now, and
// forgets the marks of calls that ended: their result is in this flush or
// a later one and needs no marker. A younger call keeps its mark for a
// later flush (flush kicks the flusher again while any is left): a call
// that ends within one FlushInterval never costs a marker, where one
// that merely spanned a flush cost one before (a third of the calls of
// BenchmarkDelivery/cluster, each one more row write on every replica).
// Called with s.mu held.
func (s *shard) takeMarks(max int, now time.Time) []Result {
	var out []Result
	keep := s.marks[:0] // filtered in place: keep never passes i
	i := 0
	for ; i < len(s.marks) && len(out) < max; i++ {
		m := s.marks[i]
		switch {
		case !m.it.calling.Load() || s.inflight[m.it.task.ID] != m.it: // ended
		case now.Sub(m.at) < s.q.cfg.FlushInterval:
			keep = append(keep, m)
		default:
			out = append(out, marker(&m.it.task))
		}
	}
	keep = append(keep, s.marks[i:]...)
	clear(s.marks[len(keep):]) // drop the forgotten items' pointers
	if s.marks = keep; len(s.marks) == 0 {
		s.marks = nil
	}
	return out
}

// marker is t's start marker. It carries the task's own values, so a store
// that does not know markers applies it as a pending result that changes
// nothing.
func marker(t *Task) Result {
	r := Result{TaskID: t.ID, Status: StatusPending, Attempts: t.Attempts, Blocked: t.Blocked, Unexpected: t.Unexpected,
		NextAttemptAt: t.NextAttemptAt, Message: t.Message, HTTPStatus: t.HTTPStatus, Started: true}
	if r.NextAttemptAt.IsZero() {
		r.NextAttemptAt = time.Now()
	}
	return r
}

// dropSettled removes from a batch about to be written the start markers
// (put back after a failed write) whose call has ended since. Called with
// s.mu held; it filters in place.
func (s *shard) dropSettled(batch []Result, called []bool) ([]Result, []bool) {
	n := 0
	for i := range batch {
		if batch[i].Started {
			if it := s.inflight[batch[i].TaskID]; it == nil || !it.calling.Load() {
				continue
			}
		}
		batch[n], called[n] = batch[i], called[i]
		n++
	}
	return batch[:n], called[:n]
}

// forgetWritten forgets the tasks whose results a write recorded (not
// those of start markers: their call is still under way) and returns how
// many results (markers not counted) it recorded. Called with s.mu held.
func (s *shard) forgetWritten(batch []Result) uint64 {
	var n uint64
	for i := range batch {
		if r := &batch[i]; !r.Started {
			if it := s.inflight[r.TaskID]; it != nil {
				s.untrack(it)
			}
			if s.readOut { // an unlocked read may hold its row from before this write
				if s.writtenInRead == nil {
					s.writtenInRead = make(map[string]struct{})
				}
				s.writtenInRead[r.TaskID] = struct{}{}
			}
			delete(s.seen, r.TaskID)
			n++
			if r.Status == StatusPending && r.NextAttemptAt.Before(s.cursor) {
				// Pending again behind the cursor. A read from the cursor
				// would pass it, and the read that took the store's low for
				// this write may have run while the task was still in flight
				// here. (Retries are due a backoff later, past the cursor:
				// this is the guard for any that is not.)
				s.readAgainFrom(r.NextAttemptAt)
			}
		}
	}
	return n
}

// noteInterrupted counts t once if an attempt of it began and recorded no
// result before this shard instance first loaded it: under an earlier owner
// (a lower epoch), or under this node at the same epoch before it restarted
// (a crash and restart faster than failure detection keeps the epoch). An
// attempt of this instance cannot be mistaken for one: it needs a load
// first, which records the task in s.seen. Called with s.mu held.
func (s *shard) noteInterrupted(t *Task) {
	if _, seen := s.seen[t.ID]; seen {
		return
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	s.seen[t.ID] = struct{}{}
	if t.AttemptEpoch == 0 || t.AttemptEpoch > s.epoch {
		return
	}
	s.q.m.interrupted.Inc()
	s.q.log.Info("attempt interrupted by an ownership change or a crash, delivering again", "task", t.ID, "shard", s.id,
		"attempt_epoch", t.AttemptEpoch, "epoch", s.epoch)
}
