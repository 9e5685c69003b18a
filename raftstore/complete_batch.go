package raftstore

import (
	"context"
	"errors"
	"sync"

	"fusebox/raftstore/state"
)

// Group commit of completes (issue 17 §3).
//
// A node's queue flushes each shard's delivery results as one CompleteTasks,
// fenced by that shard's epoch. With ~85 shards a node (256 shards, 3 nodes)
// every shard flushes its own few results, and each flush was a Raft entry of
// its own: a forward to the leader, three appends, three FSM applies and a
// dedup row, ~13× the entries per task of 16 shards (docs/architecture.md).
// The batcher coalesces the completes in flight on one node into one
// complete_tasks_multi entry (state.CompleteTasksMultiCommand), each shard's
// results a section applied with its own fence, as submit_batch.go does for
// single submits: a complete goes at once while fewer than two batches are
// in flight, otherwise it waits and goes with every complete queued behind
// it. No timer: a lone complete pays nothing and goes as the
// complete_tasks_bin entry it always was; under load the batches grow with
// the time an apply takes, and the writes are not aligned to a tick.
//
// What a coalesced complete keeps from going alone:
//   - the fence: a section whose epoch is stale is refused alone, and its
//     caller gets its *shardmap.WrongOwnerError; the others apply;
//   - validation: each complete is validated before it joins; if the FSM
//     still refuses the entry (a shard outside the map, which only the
//     replicated state shows), every complete of it is retried alone, so
//     each caller gets its own answer;
//   - a caller-supplied request id: such a complete is never coalesced (the
//     id names a whole entry);
//   - the version gate: the batcher is used only once every server knows
//     LogVersionCompleteMulti; a leader whose view is older refuses the entry
//     unproposed (upgrade_pending) and the completes go alone;
//   - cancellation: a caller whose context ends gets "write not confirmed".

const (
	// completeBatchesInFlight bounds the coalesced completes one node has in
	// flight at a time.
	completeBatchesInFlight = 2
	// maxCompleteBatchResults bounds the results of one coalesced entry (a
	// single complete holds at most state.MaxTaskBatch and still goes).
	maxCompleteBatchResults = 4 * state.MaxTaskBatch
	// maxCompleteBatchBytes bounds the encoded size of one entry (estimated
	// as EncodeCompleteTasksBin does). A follower forwards the entry to the
	// leader base64-encoded in a JSON body (read up to
	// api.MaxForwardBodyBytes, 16 MiB); 512 KiB keeps one entry's apply
	// short, so a coalesced entry does not hold up the log behind it.
	maxCompleteBatchBytes = 512 << 10
)

// completeBatcher coalesces completes (see above) over the shared
// group-commit core (group_commit.go).
type completeBatcher struct {
	groupCommit[state.CompleteTasksCommand, state.CompleteOutcome]
	s *Store
}

type completeWaiter = waiter[state.CompleteTasksCommand, state.CompleteOutcome]

// init sets the batcher up for s: a batch is at most MaxCompleteSections
// sections, maxCompleteBatchResults results and maxCompleteBatchBytes.
func (b *completeBatcher) init(s *Store) {
	b.s = s
	b.slots = completeBatchesInFlight
	b.send = b.sendBatch
	b.waited, b.wrote = s.groupCommitObservers("complete")
	b.limits = completeLimits
}

var completeLimits = batchLimits[state.CompleteTasksCommand]{
	maxItems: state.MaxCompleteSections, maxA: maxCompleteBatchResults, maxB: maxCompleteBatchBytes,
	weigh: func(c *state.CompleteTasksCommand) (int, int) { return len(c.Results), encodedSize(c) },
}

// complete queues c and waits for its batch's answer or ctx.
func (b *completeBatcher) complete(ctx context.Context, c state.CompleteTasksCommand) (state.CompleteOutcome, uint64, error) {
	return b.do(ctx, c)
}

// encodedSize estimates c's bytes in an entry, as EncodeCompleteTasksBin
// sizes its buffer.
func encodedSize(c *state.CompleteTasksCommand) int {
	n := 64 + len(c.Node)
	for i := range c.Results {
		r := &c.Results[i]
		n += 64 + len(r.TaskID) + len(r.Output) + len(r.Message) + len(r.OperationID)
	}
	return n
}

// send applies one batch as one complete_tasks_multi entry and answers its
// waiters; a batch of one, or one the entry cannot carry, goes one entry
// per complete.
func (b *completeBatcher) sendBatch(batch []*completeWaiter) {
	s := b.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ApplyHoldTimeout+s.cfg.ApplyTimeout)
	defer cancel()
	s.metrics.completeBatch.Observe(float64(len(batch)))
	if len(batch) == 1 {
		out, idx, err := applyComplete(ctx, s, batch[0].cmd)
		batch[0].answer(out, idx, err)
		return
	}
	c := state.CompleteTasksMultiCommand{Sections: make([]state.CompleteTasksCommand, len(batch))}
	for i, w := range batch {
		c.Sections[i] = w.cmd
	}
	cmd, err := state.EncodeCompleteTasksMulti(&c)
	if err != nil {
		// A value only JSON carries (errNotBinary): each goes alone.
		b.sendAlone(ctx, batch)
		return
	}
	outs, idx, err := applyCommand[[]state.CompleteOutcome](ctx, s, cmd, "")
	if err == nil && len(outs) != len(batch) {
		err = &state.Error{Code: state.CodeInternal, Message: "complete: outcomes do not match the batch"}
	}
	if err != nil {
		if errors.Is(err, state.ErrUpgradePending) {
			b.sendAlone(ctx, batch)
			return
		}
		if e := state.AsError(err); e.Code == state.CodeInvalidArgument || e.Code == state.CodeConflict {
			b.sendAlone(ctx, batch)
			return
		}
	}
	for i, w := range batch {
		if err != nil {
			w.answer(state.CompleteOutcome{}, 0, err)
			continue
		}
		w.answer(outs[i], idx, nil)
	}
}

// sendAlone applies each complete of batch as its own entry, concurrently,
// as they would have gone without the batcher.
func (b *completeBatcher) sendAlone(ctx context.Context, batch []*completeWaiter) {
	var wg sync.WaitGroup
	for _, w := range batch {
		wg.Go(func() {
			out, idx, err := applyComplete(ctx, b.s, w.cmd)
			w.answer(out, idx, err)
		})
	}
	wg.Wait()
}

// applyComplete proposes one complete: binary once the cluster knows it,
// else JSON (applyBinOrJSON).
func applyComplete(ctx context.Context, s *Store, c state.CompleteTasksCommand) (state.CompleteOutcome, uint64, error) {
	return applyBinOrJSON[state.CompleteOutcome](ctx, s, state.MsgCompleteTasks, c,
		func() ([]byte, error) { return state.EncodeCompleteTasksBin(&c) }, c.RequestID)
}
