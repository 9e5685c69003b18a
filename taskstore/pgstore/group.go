package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"fusebox/raftstore/state"
)

// Group commit of submits. A submit through the API is one small
// transaction of five or so round trips and a WAL flush; at a thousand
// single submits a second the database spent its time on commits and the
// pool's four connections queued them (issue 18: enqueue → delivered p99
// at 1,000 tasks/s). Calls that arrive while a group's transaction is in
// flight wait and go together in the next one, in arrival order, as the
// raft store puts concurrent submits in one log entry; limits and request
// id duplicates are then decided across the group in that order, exactly
// as for one batch. No goroutine is started: the first caller leads, and
// a leader hands the lead to the first caller still waiting when its
// group is done, so no caller waits for more than its own group and the
// one before it.

// maxGroupTasks bounds the tasks of one group transaction (a single call
// larger than this goes alone).
const maxGroupTasks = 2000

// groupTimeout bounds a group's transaction: it runs on a context of its
// own, so one caller going away does not fail the others' submits.
const groupTimeout = 30 * time.Second

type submitCall struct {
	tasks []state.NewTask
	at    time.Time
	out   []state.SubmitOutcome
	err   error
	done  chan struct{} // closed when out and err are set
	lead  chan struct{} // receives when this call is to lead the next group
}

type submitGroup struct {
	mu      sync.Mutex
	queue   []*submitCall
	leading bool // a caller is running a group or has been handed the lead
}

func (g *submitGroup) submit(ctx context.Context, s *Store, tasks []state.NewTask, at time.Time) ([]state.SubmitOutcome, error) {
	c := &submitCall{tasks: tasks, at: at, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.leading {
		g.mu.Unlock()
		// Wait without the caller's context: the call is in the queue and a
		// leader will run it within groupTimeout; leaving early would leave
		// a lead handed to no one.
		select {
		case <-c.done:
			return c.out, c.err
		case <-c.lead:
		}
		g.mu.Lock()
	}
	g.leading = true
	// Lead one group: the calls queued now, this one first among them.
	var calls []*submitCall
	n := 0
	for len(g.queue) > 0 && (len(calls) == 0 || n+len(g.queue[0].tasks) <= maxGroupTasks) {
		calls = append(calls, g.queue[0])
		n += len(g.queue[0].tasks)
		g.queue = g.queue[1:]
	}
	g.mu.Unlock()

	defer g.handOff() // also if runGroup panics: the queue never waits on a lead no one holds
	s.runGroup(ctx, calls, n)
	<-c.done // c is the first of calls
	return c.out, c.err
}

// handOff passes the lead to the first waiting call, or ends it.
func (g *submitGroup) handOff() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) > 0 {
		g.queue[0].lead <- struct{}{} // still leading: handed on
		return
	}
	g.leading = false
}

// runGroup commits calls' tasks in one transaction and gives each call its
// outcomes (or the error).
func (s *Store) runGroup(ctx context.Context, calls []*submitCall, n int) {
	tasks := make([]state.NewTask, 0, n)
	ats := make([]time.Time, 0, n)
	for _, c := range calls {
		tasks = append(tasks, c.tasks...)
		for range c.tasks {
			ats = append(ats, c.at)
		}
	}
	if len(calls) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
		defer cancel()
	}
	answered := 0
	defer func() { // a panic below still answers every call
		for _, c := range calls[answered:] {
			c.err = errGroupFailed
			close(c.done)
		}
	}()
	out, err := s.submitNow(ctx, tasks, ats)
	i := 0
	for _, c := range calls {
		if err != nil {
			c.err = err
		} else {
			c.out = out[i : i+len(c.tasks) : i+len(c.tasks)]
		}
		i += len(c.tasks)
		close(c.done)
		answered++
	}
}

// errGroupFailed answers the calls of a group whose transaction panicked.
var errGroupFailed = errors.New("pgstore: the submit group failed; nothing is known committed")
