package queue

import (
	"context"
	"sync/atomic"
	"time"
)

// Hand-over before a planned move (DESIGN.md, "Hand-over"). When the
// leader is about to move a shard away from a live owner (a node joined,
// another drains, an operator pinned it elsewhere), it first asks the
// owner to hand it over. The owner stops starting calls on the shard, lets
// the calls under way end, writes their results at the epoch it still
// holds, and answers. The move is then committed and the next owner finds
// those tasks done. Without it, the owner lost the shard mid-call: it
// cancelled the calls under way, dropped the answers not yet written, and
// the next owner made every one of those calls again.
//
// A released shard makes no call until its hold ends. The move normally
// ends the shard's work long before that. If the move is never committed
// (the leader failed between the hand-over and the commit, or placement
// changed its mind), the shard resumes when its hold ends.

// handover is a shard's hand-over state. admitted counts the calls past the
// admission check (attempt) that have not yet recorded their
// disposition; until is the end of the hold, in Unix nanoseconds (0: none).
// admit increments and then reads until; handOver stores until and then
// reads admitted: with Go's sequentially consistent atomics, either a call
// sees the hold or the hand-over sees the call.
type handover struct {
	admitted atomic.Int64
	until    atomic.Int64
	idle     chan struct{} // 1-slot: admitted reached 0 during a hold
	flushed  chan struct{} // 1-slot: a result write ended
}

func newHandover() handover {
	return handover{idle: make(chan struct{}, 1), flushed: make(chan struct{}, 1)}
}

// holding reports whether a hand-over holds the shard at now, and until when.
func (h *handover) holding(now time.Time) (time.Time, bool) {
	u := h.until.Load()
	if u == 0 || now.UnixNano() >= u {
		return time.Time{}, false
	}
	return time.Unix(0, u), true
}

// admit lets a call start unless a hand-over holds the shard. A caller
// that was admitted calls leave once its disposition is recorded.
func (h *handover) admit() bool {
	h.admitted.Add(1)
	if u := h.until.Load(); u != 0 && time.Now().UnixNano() < u { // holding, without a clock read while never held
		h.leave()
		return false
	}
	return true
}

func (h *handover) leave() {
	if h.admitted.Add(-1) == 0 && h.until.Load() != 0 {
		signal(h.idle)
	}
}

// HandedOver is what HandOver did for one shard.
type HandedOver struct {
	Shard int
	Epoch uint64
	// Waited is how long from the start of the hand-over the calls under
	// way took to end and their results to be written.
	Waited time.Duration
	// Unfinished counts calls still under way and results not yet
	// written when ctx ended: the next owner may make those calls again.
	Unfinished int
	// UnderWay is the part of Unfinished that is calls still under way.
	UnderWay int
	// Results are the results not yet written (the rest of Unfinished), in
	// the order they would have been written, so that the leader, which
	// reaches the store, can write them at Epoch before the move
	// (node/handover.go) when this node cannot: then the next owner does
	// not make those calls again. The shard keeps its own copies and keeps
	// trying to write them.
	Results []Result
}

// HandOver holds each of shards (id → epoch) that this node works on at
// that epoch until hold from now: no call starts, the calls under way end
// and their results are written. It returns when that is done for every
// shard, or when ctx ends (the calls then keep running; the move cancels
// them). Shards not worked on here at that epoch are left out of the
// answer: the caller needs nothing from them.
func (q *Queue) HandOver(ctx context.Context, shards map[int]uint64, hold time.Duration) []HandedOver {
	return q.handOver(ctx, shards, hold, true)
}

// HandOverUnwritable is HandOver for a node that knows its results cannot
// be written now (it cannot reach its task store): it returns as soon as
// the calls under way have ended, with their unwritten results
// (HandedOver.Results), instead of waiting out ctx for writes that will
// not happen — the leader writes them, and moves the shards that much
// sooner.
func (q *Queue) HandOverUnwritable(ctx context.Context, shards map[int]uint64, hold time.Duration) []HandedOver {
	return q.handOver(ctx, shards, hold, false)
}

func (q *Queue) handOver(ctx context.Context, shards map[int]uint64, hold time.Duration, waitWrites bool) []HandedOver {
	until := time.Now().Add(hold)
	q.mu.Lock()
	var work []*shard
	for id, e := range shards {
		if s, ok := q.shards[id]; ok && s.epoch == e && !q.closing.Load() {
			work = append(work, s)
		}
	}
	q.mu.Unlock()
	if len(work) == 0 {
		return nil
	}
	ids := make([]int, len(work))
	for i, s := range work {
		s.ho.until.Store(until.UnixNano())
		signal(s.wake) // the reader stops reading
		ids[i] = s.id
	}
	begin := time.Now()
	out := make([]HandedOver, len(work))
	unfinished := 0
	for i, s := range work {
		underWay, unwritten := s.settle(ctx, waitWrites)
		out[i] = HandedOver{Shard: s.id, Epoch: s.epoch, Waited: time.Since(begin), Unfinished: underWay + unwritten, UnderWay: underWay}
		if unwritten > 0 {
			out[i].Results = s.unwritten()
		}
		unfinished += underWay + unwritten
	}
	q.log.Info("shards handed over for a move", "shards", ids, "took", time.Since(begin), "unfinished", unfinished, "hold", hold)
	return out
}

// settle waits, under a hold, until no admitted call is left and every
// result recorded by then is written. It returns what was still
// unfinished when ctx ended — calls under way, results not yet written —
// (0 and 0 when done, or when the shard was lost). Without waitWrites it
// returns once the calls have ended.
func (s *shard) settle(ctx context.Context, waitWrites bool) (underWay, unwritten int) {
	for {
		n := s.ho.admitted.Load()
		if n == 0 {
			break
		}
		select {
		case <-s.ho.idle:
		case <-ctx.Done():
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.lost {
				return 0, 0
			}
			return int(n), int(s.finished - s.written)
		}
	}
	s.mu.Lock()
	target := s.finished
	s.mu.Unlock()
	signal(s.kick)
	for {
		s.mu.Lock()
		left, lost := int(target)-int(s.written), s.lost
		s.mu.Unlock()
		if left <= 0 || lost {
			return 0, 0
		}
		if !waitWrites {
			return 0, left
		}
		select {
		case <-s.ho.flushed:
		case <-ctx.Done():
			return 0, left
		}
	}
}

// unwritten copies the shard's results not yet written — the batch a write
// has under way, then the rest — without start markers (a call under way
// has no result to write yet). Nil once the shard is lost: its epoch is no
// longer current. None of these tasks is called again during the hold, so
// no later result of the same task can follow them.
func (s *shard) unwritten() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost {
		return nil
	}
	var out []Result
	for _, rs := range [][]Result{s.writing, s.results} {
		for _, r := range rs {
			if !r.Started {
				out = append(out, r)
			}
		}
	}
	return out
}
