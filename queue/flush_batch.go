package queue

import (
	"context"
	"errors"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// maxFlushBytes bounds the outputs and messages of one result write: a
// write counted only by results could carry 256 outputs of 1 MiB, more than
// a follower may forward (16 MiB) or raft-wal reads back as one entry
// (64 MiB), and a write refused for its size is retried forever.
const maxFlushBytes = 4 << 20

// flushCount is how many of results (at most max) one write takes: at
// least one, and no more than maxFlushBytes of outputs and messages.
func flushCount(results []Result, max int) int {
	n := min(len(results), max)
	size := 0
	for i := range n {
		size += len(results[i].Output) + len(results[i].Message)
		if size > maxFlushBytes && i > 0 {
			return i
		}
	}
	return n
}

// writeOneByOne writes batch a result at a time after the store refused
// the whole batch as invalid (state.ErrInvalidArgument): a result the store
// refuses alone is written again without its output and with the refusal
// in its message, and one refused even so is dropped — logged, counted
// (writes{outcome="dropped"}), and forgotten here, so the task, still
// pending in the store, is read and called again. Before, one such result
// (a message cut inside a character, an output grown past its limit) got
// its whole batch put back and retried forever, and none of the shard's
// results were written again. Another error puts the rest back, as flush
// does.
func (s *shard) writeOneByOne(ctx context.Context, batch []Result, called []bool) error {
	q := s.q
	for i := range batch {
		one := batch[i : i+1]
		err := q.store.Complete(ctx, s.id, s.epoch, one)
		if errors.Is(err, state.ErrInvalidArgument) {
			fixed := []Result{withoutOutput(batch[i], err)}
			if err = q.store.Complete(ctx, s.id, s.epoch, fixed); errors.Is(err, state.ErrInvalidArgument) {
				q.m.writes.WithLabelValues("dropped").Inc()
				q.log.Error("result refused even without its output; dropped, the task will be called again", "shard", s.id, "task", batch[i].TaskID, "error", err)
				err = nil
			} else if err == nil {
				q.log.Warn("result written without its output after the store refused it", "shard", s.id, "task", batch[i].TaskID)
			}
		}
		if err != nil {
			return s.bookWrite(batch[i:], called[i:], err) // the rest go back
		}
		_ = s.bookWrite(one, called[i:i+1], nil)
	}
	signal(s.wake)
	signal(s.ho.flushed)
	return nil
}

// withoutOutput is r with no output and no operation id, and the store's
// refusal at the head of its message, cut to the stored limit on a
// character boundary. The operation id goes too: a token longer than the
// store keeps (raftstore: 4096 bytes; the executor now fails such a start,
// transport.MaxOperationTokenBytes) was refused again here, the result
// dropped, and the task — still pending — called again at the full rate,
// no attempt counted, no backoff. Without its token the start's result is
// written and the task ends.
func withoutOutput(r Result, refusal error) Result {
	dropped := "output"
	if r.OperationID != "" {
		dropped = "output and operation_id"
	}
	r.Output, r.OperationID = nil, ""
	msg := "result refused by the task store (" + refusal.Error() + "); " + dropped + " dropped"
	if r.Message != "" {
		msg += ": " + r.Message
	}
	r.Message = state.ClipMessage(msg)
	return r
}

// bookWrite books a result write's answer: a refusal (stale epoch) loses the
// shard, another error puts the results back for a retry, success forgets
// them. It returns err.
func (s *shard) bookWrite(batch []Result, called []bool, err error) error {
	q := s.q
	var wrong *shardmap.WrongOwnerError
	switch {
	case errors.As(err, &wrong):
		q.m.writes.WithLabelValues("refused").Inc()
		s.putBack(batch, called) // counted by lose
		s.lose("result write refused: " + wrong.Error())
		if ro, ok := q.own.(RefusalOwnership); ok && ro.Refused(s.id, s.epoch, wrong) {
			q.rewatchSoon()
		}
		return err
	case err != nil:
		q.m.writes.WithLabelValues("error").Inc()
		q.log.Warn("result write failed, will retry", "shard", s.id, "results", len(batch), "error", err)
		s.putBack(batch, called)
		return err
	}
	q.m.writes.WithLabelValues("ok").Inc()
	s.mu.Lock()
	s.writing = s.writing[min(len(batch), len(s.writing)):] // batch is its head (writeOneByOne: one result of it)
	s.written += s.forgetWritten(batch)
	s.resultsWrittenLocked()
	s.mu.Unlock()
	return nil
}
