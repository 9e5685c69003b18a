package raftstore

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/raftstore/state"
)

// groupCommit is what the two batchers (submit_batch.go, complete_batch.go)
// share: a queue of callers waiting for one write each, at most `slots`
// flush goroutines taking batches off it, and the stop handshake. What a
// batch may hold and how it is written are the batcher's (limits, send).
//
// The rule: a write goes at once while fewer than `slots` batches are in
// flight; otherwise it waits and goes with everything queued behind it. No
// timer: a lone write pays nothing, and under load a batch grows with the
// time one apply takes.
type groupCommit[C, O any] struct {
	slots  int
	limits batchLimits[C]
	send   func(batch []*waiter[C, O]) // answers every waiter of batch
	// waited and wrote, when set, observe each write's time in the queue
	// and each batch's send (fusebox_raft_group_commit_seconds): the two
	// parts of a write's latency the batcher adds to and is made of.
	waited, wrote prometheus.Observer

	mu       sync.Mutex
	queue    []*waiter[C, O]
	inFlight int
	closed   bool
	wg       sync.WaitGroup

	testHookSend func(n int) // tests: called before a batch of n is sent
}

// batchLimits bounds one batch: at most maxItems writes, and the sums of
// weigh's two weights at most maxA and maxB. same, when set, says whether a
// write may join a batch that begins with first. The first write of a batch
// always goes, however heavy.
type batchLimits[C any] struct {
	maxItems   int
	maxA, maxB int
	weigh      func(c *C) (a, b int)
	same       func(first, next *C) bool
}

// waiter is one caller's write waiting for its batch.
type waiter[C, O any] struct {
	cmd  C
	a, b int            // its weights (batchLimits.weigh)
	done chan answer[O] // buffered 1
	at   time.Time      // when it was queued
}

type answer[O any] struct {
	out   O
	index uint64
	err   error
}

func (w *waiter[C, O]) answer(out O, index uint64, err error) {
	w.done <- answer[O]{out: out, index: index, err: err}
}

// newWaiter weighs c for the batcher's limits.
func (g *groupCommit[C, O]) newWaiter(c C) *waiter[C, O] {
	w := &waiter[C, O]{cmd: c, done: make(chan answer[O], 1), at: time.Now()}
	w.a, w.b = g.limits.weigh(&w.cmd)
	return w
}

// do queues c and waits for its batch's answer or ctx.
func (g *groupCommit[C, O]) do(ctx context.Context, c C) (O, uint64, error) {
	var zero O
	w := g.newWaiter(c)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return zero, 0, unavailable("the node is shutting down")
	}
	g.queue = append(g.queue, w)
	if g.inFlight < g.slots {
		g.inFlight++
		g.wg.Add(1)
		go g.flushLoop()
	}
	g.mu.Unlock()
	select {
	case a := <-w.done:
		return a.out, a.index, a.err
	case <-ctx.Done():
		return zero, 0, &state.Error{Code: state.CodeUnavailable, Message: "write not confirmed: " + ctx.Err().Error()}
	}
}

// flushLoop sends batches until the queue is empty.
func (g *groupCommit[C, O]) flushLoop() {
	defer g.wg.Done()
	for {
		batch := g.take()
		if batch == nil {
			return
		}
		if g.testHookSend != nil {
			g.testHookSend(len(batch))
		}
		start := time.Now()
		for _, w := range batch {
			observe(g.waited, start.Sub(w.at))
		}
		g.send(batch)
		observe(g.wrote, time.Since(start))
	}
}

func observe(o prometheus.Observer, d time.Duration) {
	if o != nil {
		o.Observe(d.Seconds())
	}
}

// take removes the next batch from the queue: the longest prefix within
// the limits. With nothing queued it retires the caller's flush slot.
func (g *groupCommit[C, O]) take() []*waiter[C, O] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.inFlight--
		return nil
	}
	l := g.limits
	n, a, b := 0, 0, 0
	for n < len(g.queue) && n < l.maxItems {
		w := g.queue[n]
		if n > 0 && (a+w.a > l.maxA || b+w.b > l.maxB || (l.same != nil && !l.same(&g.queue[0].cmd, &w.cmd))) {
			break
		}
		a, b = a+w.a, b+w.b
		n++
	}
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil // let the backing array go
	}
	return batch
}

// close refuses new writes, fails the queued ones and waits for the
// batches in flight (each bounded by the store's apply timeouts, and cut
// short by the store's context, which Close cancels first).
func (g *groupCommit[C, O]) close() {
	var zero O
	g.mu.Lock()
	g.closed = true
	queued := g.queue
	g.queue = nil
	g.mu.Unlock()
	for _, w := range queued {
		w.answer(zero, 0, unavailable("the node is shutting down"))
	}
	g.wg.Wait()
}
