package pgstore

import (
	"context"
	"sync"
)

// The leader hand-off both group commits use (group.go for submits,
// complete_group.go for result writes). No goroutine and no timer: a call
// queues; if no group is running it leads one, taking the calls queued at
// that moment (itself first) up to its group's limit; otherwise it waits
// until a leader's group answers it or the lead is handed to it. A leader
// hands the lead to the first call still queued when its group is done,
// so no call waits for more than its own group and the one before it.

// groupSlot is what every call of a group carries.
type groupSlot struct {
	done chan struct{} // closed when the call's answer is set
	lead chan struct{} // receives when this call is to lead the next group
}

func (s *groupSlot) slot() *groupSlot { return s }

// leadQueue is the queue of calls and who leads.
type leadQueue[C interface{ slot() *groupSlot }] struct {
	mu      sync.Mutex
	queue   []C
	leading bool // a caller is running a group or has been handed the lead
}

// join queues c and returns the calls c is to run as their leader, c
// first, or nil once another leader's group has answered c. take is asked
// about each queued call in order, first says whether it is the group's
// first (always taken: take only accounts for it); a false ends the group.
// A caller given calls must run them, answer each, and then call handOff
// (deferred, so that a panic does not leave the queue waiting on a lead
// no one holds).
//
// The wait does not take the caller's context: a queued call is run by a
// leader within the group's timeout, and leaving early would leave a lead
// handed to no one.
func (q *leadQueue[C]) join(c C, take func(next C, first bool) bool) []C {
	s := c.slot()
	s.done, s.lead = make(chan struct{}), make(chan struct{}, 1)
	q.mu.Lock()
	q.queue = append(q.queue, c)
	if q.leading {
		q.mu.Unlock()
		select {
		case <-s.done:
			return nil
		case <-s.lead:
		}
		q.mu.Lock()
	}
	q.leading = true
	var calls []C
	for len(q.queue) > 0 && (take(q.queue[0], len(calls) == 0) || len(calls) == 0) {
		calls = append(calls, q.queue[0])
		q.queue = q.queue[1:]
	}
	q.mu.Unlock()
	return calls
}

// handOff passes the lead to the first waiting call, or ends it.
func (q *leadQueue[C]) handOff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) > 0 {
		q.queue[0].slot().lead <- struct{}{} // still leading: handed on
		return
	}
	q.leading = false
}

// queued is how many calls wait for the next group (tests).
func (q *leadQueue[C]) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// groupContext is the context a leader runs n calls on: the caller's own
// for a call alone, else one of the group's, bounded by groupTimeout, so
// that one caller going away does not fail the others.
func groupContext(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	if n > 1 {
		return context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	}
	return ctx, func() {}
}
