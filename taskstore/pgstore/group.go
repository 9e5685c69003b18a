package pgstore

import (
	"context"
	"errors"
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
// as for one batch. The first caller leads and hands the lead on
// (leadQueue, lead.go).

// maxGroupTasks bounds the tasks of one group transaction (a single call
// larger than this goes alone).
const maxGroupTasks = 2000

// groupTimeout bounds a group's transaction: it runs on a context of its
// own, so one caller going away does not fail the others' submits.
const groupTimeout = 30 * time.Second

type submitCall struct {
	groupSlot // done is closed when out and err are set
	tasks     []state.NewTask
	at        time.Time
	out       []state.SubmitOutcome
	err       error
}

type submitGroup struct {
	leadQueue[*submitCall]
}

func (g *submitGroup) submit(ctx context.Context, s *Store, tasks []state.NewTask, at time.Time) ([]state.SubmitOutcome, error) {
	c := &submitCall{tasks: tasks, at: at}
	n := 0
	calls := g.join(c, func(next *submitCall, first bool) bool {
		if !first && n+len(next.tasks) > maxGroupTasks {
			return false
		}
		n += len(next.tasks)
		return true
	})
	if calls == nil { // answered by another leader's group
		return c.out, c.err
	}
	defer g.handOff() // also if runGroup panics
	s.runGroup(ctx, calls, n)
	<-c.done // c is the first of calls
	return c.out, c.err
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
	ctx, cancel := groupContext(ctx, len(calls))
	defer cancel()
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
