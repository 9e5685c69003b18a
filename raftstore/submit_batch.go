package raftstore

import (
	"context"

	"fusebox/raftstore/state"
)

// Group commit of single-task submits.
//
// A client that submits tasks one by one (POST /v1/tasks) would otherwise
// cost one Raft entry, one forward to the leader and one FSM transaction per
// task, and those per-entry costs, not the tasks, were what saturated a
// 3-node cluster at about 1,000 single submits a second (docs/architecture.md).
// The batcher sends a single submit at once when no batch is in flight; while
// one is, later submits wait and go together in the next one. No timer: at a
// low rate every submit goes alone and pays nothing, and under load the
// batches grow with the time an apply takes.
//
// What a coalesced submit keeps from going alone:
//   - validation: each task is checked before it joins a batch, so a bad one
//     is refused on its own; if the FSM still refuses a batch (a conflict
//     that only the replicated state shows), every task of it is retried
//     alone, so each caller gets its own task's answer;
//   - idempotency by task request_id: the FSM checks it per task, in order,
//     so two submits with one request_id in a batch answer as if sequential;
//   - a caller-supplied X-Request-Id: such a submit is never coalesced, so
//     a retried write still applies once (the id names the whole entry);
//   - cancellation: a caller whose context ends gets "write not confirmed",
//     as when a lone apply is abandoned; its task may still commit.

const (
	// submitBatchesInFlight bounds the coalesced submits one node has in
	// flight at a time.
	submitBatchesInFlight = 2
	// maxSubmitBatchBytes bounds the request bytes of one coalesced batch; a
	// single task larger than this still goes (alone).
	maxSubmitBatchBytes = 4 << 20
)

// submitBatcher coalesces single-task submits (see above) over the shared
// group-commit core (group_commit.go).
type submitBatcher struct {
	groupCommit[state.SubmitTasksCommand, state.SubmitOutcome]
	s *Store
}

type submitWaiter = waiter[state.SubmitTasksCommand, state.SubmitOutcome]

// init sets the batcher up for s: a batch is at most MaxTaskBatch tasks and
// maxSubmitBatchBytes of requests, all with one MaxShardBacklog.
func (b *submitBatcher) init(s *Store) {
	b.s = s
	b.slots = submitBatchesInFlight
	b.send = b.sendBatch
	b.waited, b.wrote = s.groupCommitObservers("submit")
	b.limits = batchLimits[state.SubmitTasksCommand]{
		maxItems: state.MaxTaskBatch, maxA: maxSubmitBatchBytes, maxB: 0,
		weigh: func(c *state.SubmitTasksCommand) (int, int) { return len(c.Tasks[0].Request), 0 },
		same: func(first, next *state.SubmitTasksCommand) bool {
			return first.MaxShardBacklog == next.MaxShardBacklog
		},
	}
}

// submit queues c (one validated task, no request id) and waits for its
// batch's answer or ctx.
func (b *submitBatcher) submit(ctx context.Context, c state.SubmitTasksCommand) (state.SubmitOutcome, uint64, error) {
	return b.do(ctx, c)
}

// send applies one batch and answers its waiters. A batch the FSM refuses
// is retried task by task, so each refusal reaches its own caller.
func (b *submitBatcher) sendBatch(batch []*submitWaiter) {
	s := b.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ApplyHoldTimeout+s.cfg.ApplyTimeout)
	defer cancel()
	s.metrics.submitBatch.Observe(float64(len(batch)))
	if len(batch) == 1 {
		out, idx, err := applySubmit(ctx, s, batch[0].cmd)
		answerSubmit(batch[0], out, idx, err)
		return
	}
	c := state.SubmitTasksCommand{CommandMeta: batch[0].cmd.CommandMeta, MaxShardBacklog: batch[0].cmd.MaxShardBacklog,
		Tasks: make([]state.NewTask, len(batch))}
	for i, w := range batch {
		c.Tasks[i] = w.cmd.Tasks[0]
		if w.cmd.At.Before(c.At) {
			c.At = w.cmd.At
		}
	}
	out, idx, err := applySubmit(ctx, s, c)
	if err == nil && len(out) != len(batch) {
		err = &state.Error{Code: state.CodeInternal, Message: "submit: outcomes do not match the batch"}
	}
	if err != nil {
		if e := state.AsError(err); e.Code == state.CodeInvalidArgument || e.Code == state.CodeConflict {
			for _, w := range batch {
				o, i, err := applySubmit(ctx, s, w.cmd)
				answerSubmit(w, o, i, err)
			}
			return
		}
	}
	for i, w := range batch {
		if err != nil {
			w.answer(state.SubmitOutcome{}, 0, err)
			continue
		}
		w.answer(out[i], idx, nil)
	}
}

// applySubmit proposes a submit: binary once the cluster knows it, else
// JSON (applyBinOrJSON).
func applySubmit(ctx context.Context, s *Store, c state.SubmitTasksCommand) ([]state.SubmitOutcome, uint64, error) {
	return applyBinOrJSON[[]state.SubmitOutcome](ctx, s, state.MsgSubmitTasks, c,
		func() ([]byte, error) { return state.EncodeSubmitTasksBin(&c) }, c.RequestID)
}

// answerSubmit answers w with the one outcome a lone submit has.
func answerSubmit(w *submitWaiter, out []state.SubmitOutcome, index uint64, err error) {
	if err == nil && len(out) != 1 {
		err = &state.Error{Code: state.CodeInternal, Message: "submit: no outcome for the task"}
	}
	if err != nil {
		w.answer(state.SubmitOutcome{}, 0, err)
		return
	}
	w.answer(out[0], index, nil)
}
