package raftstore

import (
	"context"
	"fusebox/raftstore/state"
	"sync"
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

// submitWaiter is one single-task submit waiting for its batch.
type submitWaiter struct {
	cmd  state.SubmitTasksCommand // validated; one task
	done chan submitAnswer        // buffered 1
}

type submitAnswer struct {
	out   state.SubmitOutcome
	index uint64
	err   error
}

// submitBatcher coalesces single-task submits (see above). Its flush
// goroutines belong to it; close fails whatever is still queued and waits
// for the batches in flight.
type submitBatcher struct {
	s *Store

	mu       sync.Mutex
	queue    []*submitWaiter
	inFlight int
	closed   bool
	wg       sync.WaitGroup

	testHookSend func(n int) // tests: called before a batch of n is applied
}

// submit queues c (one validated task, no request id) and waits for its
// batch's answer or ctx.
func (b *submitBatcher) submit(ctx context.Context, c state.SubmitTasksCommand) (state.SubmitOutcome, uint64, error) {
	w := &submitWaiter{cmd: c, done: make(chan submitAnswer, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return state.SubmitOutcome{}, 0, unavailable("the node is shutting down")
	}
	b.queue = append(b.queue, w)
	if b.inFlight < submitBatchesInFlight {
		b.inFlight++
		b.wg.Add(1)
		go b.flushLoop()
	}
	b.mu.Unlock()
	select {
	case a := <-w.done:
		return a.out, a.index, a.err
	case <-ctx.Done():
		return state.SubmitOutcome{}, 0, &state.Error{Code: state.CodeUnavailable, Message: "write not confirmed: " + ctx.Err().Error()}
	}
}

// flushLoop sends batches until the queue is empty.
func (b *submitBatcher) flushLoop() {
	defer b.wg.Done()
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		b.send(batch)
	}
}

// take removes the next batch from the queue: the longest prefix with one
// MaxShardBacklog, at most MaxTaskBatch tasks and maxSubmitBatchBytes of
// requests. With nothing queued it retires the caller's flush slot.
func (b *submitBatcher) take() []*submitWaiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.inFlight--
		return nil
	}
	n, size := 0, 0
	backlog := b.queue[0].cmd.MaxShardBacklog
	for n < len(b.queue) && n < state.MaxTaskBatch {
		w := b.queue[n]
		sz := len(w.cmd.Tasks[0].Request)
		if n > 0 && (w.cmd.MaxShardBacklog != backlog || size+sz > maxSubmitBatchBytes) {
			break
		}
		size += sz
		n++
	}
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	return batch
}

// send applies one batch and answers its waiters. A batch the FSM refuses
// is retried task by task, so each refusal reaches its own caller.
func (b *submitBatcher) send(batch []*submitWaiter) {
	s := b.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ApplyHoldTimeout+s.cfg.ApplyTimeout)
	defer cancel()
	if b.testHookSend != nil {
		b.testHookSend(len(batch))
	}
	s.metrics.submitBatch.Observe(float64(len(batch)))
	if len(batch) == 1 {
		out, idx, err := applySubmit(ctx, s, batch[0].cmd)
		batch[0].answer(out, idx, err)
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
				w.answer(o, i, err)
			}
			return
		}
	}
	for i, w := range batch {
		if err != nil {
			w.answer(nil, 0, err)
			continue
		}
		w.answer(out[i:i+1], idx, nil)
	}
}

// applySubmit proposes a submit: binary once the cluster knows it, else
// JSON (applyBinOrJSON).
func applySubmit(ctx context.Context, s *Store, c state.SubmitTasksCommand) ([]state.SubmitOutcome, uint64, error) {
	return applyBinOrJSON[[]state.SubmitOutcome](ctx, s, state.MsgSubmitTasks, c,
		func() ([]byte, error) { return state.EncodeSubmitTasksBin(&c) }, c.RequestID)
}

func (w *submitWaiter) answer(out []state.SubmitOutcome, index uint64, err error) {
	a := submitAnswer{index: index, err: err}
	if err == nil {
		if len(out) != 1 {
			a.err = &state.Error{Code: state.CodeInternal, Message: "submit: no outcome for the task"}
		} else {
			a.out = out[0]
		}
	}
	w.done <- a
}

// close refuses new submits, fails the queued ones and waits for the
// batches in flight (each bounded by the store's apply timeouts, and cut
// short by the store's context, which Close cancels first).
func (b *submitBatcher) close() {
	b.mu.Lock()
	b.closed = true
	queued := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, w := range queued {
		w.answer(nil, 0, unavailable("the node is shutting down"))
	}
	b.wg.Wait()
}
