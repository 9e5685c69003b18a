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

type completeWaiter struct {
	cmd  state.CompleteTasksCommand // validated, no request id
	size int                        // estimated encoded bytes
	done chan completeAnswer        // buffered 1
}

type completeAnswer struct {
	out   state.CompleteOutcome
	index uint64
	err   error
}

// completeBatcher coalesces completes (see above). Its flush goroutines
// belong to it; close fails whatever is still queued and waits for the
// batches in flight.
type completeBatcher struct {
	s *Store

	mu       sync.Mutex
	queue    []*completeWaiter
	inFlight int
	closed   bool
	wg       sync.WaitGroup

	testHookSend func(n int) // tests: called before a batch of n is applied
}

// complete queues c and waits for its batch's answer or ctx.
func (b *completeBatcher) complete(ctx context.Context, c state.CompleteTasksCommand) (state.CompleteOutcome, uint64, error) {
	w := &completeWaiter{cmd: c, size: encodedSize(&c), done: make(chan completeAnswer, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return state.CompleteOutcome{}, 0, unavailable("the node is shutting down")
	}
	b.queue = append(b.queue, w)
	if b.inFlight < completeBatchesInFlight {
		b.inFlight++
		b.wg.Add(1)
		go b.flushLoop()
	}
	b.mu.Unlock()
	select {
	case a := <-w.done:
		return a.out, a.index, a.err
	case <-ctx.Done():
		return state.CompleteOutcome{}, 0, &state.Error{Code: state.CodeUnavailable, Message: "write not confirmed: " + ctx.Err().Error()}
	}
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

// flushLoop sends batches until the queue is empty.
func (b *completeBatcher) flushLoop() {
	defer b.wg.Done()
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		b.send(batch)
	}
}

// take removes the next batch from the queue: the longest prefix within
// MaxCompleteSections sections, maxCompleteBatchResults results and
// maxCompleteBatchBytes. With nothing queued it retires the caller's flush
// slot.
func (b *completeBatcher) take() []*completeWaiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.inFlight--
		return nil
	}
	n, results, size := 0, 0, 0
	for n < len(b.queue) && n < state.MaxCompleteSections {
		w := b.queue[n]
		if n > 0 && (results+len(w.cmd.Results) > maxCompleteBatchResults || size+w.size > maxCompleteBatchBytes) {
			break
		}
		results += len(w.cmd.Results)
		size += w.size
		n++
	}
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	return batch
}

// send applies one batch as one complete_tasks_multi entry and answers its
// waiters; a batch of one, or one the entry cannot carry, goes one entry
// per complete.
func (b *completeBatcher) send(batch []*completeWaiter) {
	s := b.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ApplyHoldTimeout+s.cfg.ApplyTimeout)
	defer cancel()
	if b.testHookSend != nil {
		b.testHookSend(len(batch))
	}
	s.metrics.completeBatch.Observe(float64(len(batch)))
	if len(batch) == 1 {
		batch[0].answer(applyComplete(ctx, s, batch[0].cmd))
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
		wg.Go(func() { w.answer(applyComplete(ctx, b.s, w.cmd)) })
	}
	wg.Wait()
}

// applyComplete proposes one complete: binary once the cluster knows it,
// else JSON (applyBinOrJSON).
func applyComplete(ctx context.Context, s *Store, c state.CompleteTasksCommand) (state.CompleteOutcome, uint64, error) {
	return applyBinOrJSON[state.CompleteOutcome](ctx, s, state.MsgCompleteTasks, c,
		func() ([]byte, error) { return state.EncodeCompleteTasksBin(&c) }, c.RequestID)
}

func (w *completeWaiter) answer(out state.CompleteOutcome, index uint64, err error) {
	w.done <- completeAnswer{out: out, index: index, err: err}
}

// close refuses new completes, fails the queued ones and waits for the
// batches in flight (each bounded by the store's apply timeouts, and cut
// short by the store's context, which Close cancels first).
func (b *completeBatcher) close() {
	b.mu.Lock()
	b.closed = true
	queued := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, w := range queued {
		w.answer(state.CompleteOutcome{}, 0, unavailable("the node is shutting down"))
	}
	b.wg.Wait()
}
