package raftstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strconv"

	"fusebox/internal/fastjson"
	"fusebox/raftstore/state"
)

// Retries of refused submits.
//
// The FSM remembers the result of every command under its request id and
// answers a later entry with that id with the first result, applying
// nothing (state/DESIGN.md, "Dedup"). A task a backlog limit refuses is an
// outcome of a successful submit (SubmitOverloaded), not an error, so it was
// remembered too: a client that got 429 and retried with the same
// X-Request-Id once the backlog drained got the same 429, for as long as the
// id was remembered, although the 429's Retry-After asks for exactly that
// retry. Idempotency keys elsewhere (Stripe's; the PostgreSQL task store,
// which inserts nothing for a refused task) do not keep such refusals.
//
// What an entry does on apply cannot change (an old log replays the same way
// forever), so the proposer decides the refused tasks afresh instead. When a
// submit's answer is a replay and refuses some tasks, those tasks alone are
// proposed again under an id derived from the submit's and from the index of
// the entry that refused them (retryID: root@index); if that answer is a
// replay that still refuses some, the next link is derived from its index,
// and so on. Every retry of one request derives the same ids from the same
// remembered answers, so retries — concurrent ones, on any node — still
// dedup among themselves: the first derived entry decides, the others get
// its answer. Accepted tasks keep the answer they had (same task ids, no
// second insert). An answer decided by this call's own entry is final for
// the call, refusals included: each call makes at most one fresh decision,
// and its retry follows the chain one link further.
//
// A replay is an answer from an entry this replica had applied before the
// proposal: the proposal's own entry comes after everything applied. No
// wire or FSM change is needed to tell, on the leader or a follower alike.
// An answer replayed to a node still behind reads as its own (that retry
// gets the refusal once more), so a refusal is answered only once this
// replica applied it: a retry through the same node reads it as a replay.
//
// The links a replica already applied are followed in its state
// (State.RequestResult) instead of by proposing each one again: a batch
// retried through a long overload leaves a link per retry, and walking
// them costs no Raft entry. The API reads the same chain (RememberedSubmit)
// so that a retry whose answer still refuses its task meets the local
// backlog check again (api/submit_guard.go) instead of adding a link.

const (
	// maxRetryProposals bounds the derived submits one call proposes: more
	// than one only while this replica has not yet applied a link another
	// retry wrote.
	maxRetryProposals = 8
	// maxRetryLinks bounds the links one call follows in the local state.
	maxRetryLinks = 1024
)

// retryID is the request id under which the tasks that the entry at index
// refused, for a submit proposed with request id root, are proposed again.
// It fits the log's bound (an id from the API is 48 bytes); a longer root
// is hashed.
func retryID(root string, index uint64) string {
	id := root + "@" + strconv.FormatUint(index, 10)
	if len(id) <= state.MaxRequestIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "retry:" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// submitRetrying proposes c (which has a request id) and, when its answer
// is a replayed refusal, decides the refused tasks afresh down the chain of
// derived ids (see above). The index is the highest of the answers'.
func (s *Store) submitRetrying(ctx context.Context, c state.SubmitTasksCommand) ([]state.SubmitOutcome, uint64, error) {
	out, idx, err := s.submitChain(ctx, c)
	if err == nil && refusedOf(out) != nil {
		// So that this node's retry of it reads it as a replay.
		wctx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
		_ = s.WaitForApplied(wctx, idx)
		cancel()
	}
	return out, idx, err
}

func (s *Store) submitChain(ctx context.Context, c state.SubmitTasksCommand) ([]state.SubmitOutcome, uint64, error) {
	before := s.fsm.AppliedIndex()
	out, idx, err := applySubmit(ctx, s, c)
	if err != nil || idx > before || refusedOf(out) == nil {
		return out, idx, err // this entry's own answer, or nothing refused
	}
	a := newChainAnswer(c.RequestID, out, idx)
	for proposals := 0; ; proposals++ {
		if err := a.followLocal(s.state); err != nil {
			return nil, 0, err
		}
		if len(a.refused) == 0 || proposals == maxRetryProposals {
			break
		}
		link := state.SubmitTasksCommand{CommandMeta: c.CommandMeta, MaxShardBacklog: c.MaxShardBacklog,
			Tasks: make([]state.NewTask, len(a.refused))}
		link.RequestID = retryID(a.root, a.index)
		for i, p := range a.refused {
			link.Tasks[i] = c.Tasks[p]
		}
		before = s.fsm.AppliedIndex()
		o, i, err := applySubmit(ctx, s, link)
		if err != nil {
			return nil, 0, err
		}
		if err := a.take(o, i); err != nil {
			return nil, 0, err
		}
		if i > before {
			break // decided by this call's entry: final for this call
		}
	}
	return a.out, a.last, nil
}

// RememberedSubmit is the answer this replica remembers for a submit
// proposed with request id, following the retries of its refused tasks
// that it has applied (see above), and whether it remembers one. A
// remembered error answers nil outcomes and true. The API checks a retry
// whose answer still refuses its task against the backlog again.
func (s *Store) RememberedSubmit(requestID string) ([]state.SubmitOutcome, bool) {
	if requestID == "" {
		return nil, false
	}
	r, ok := s.state.RequestResult(requestID)
	if !ok || r.Err != nil {
		return nil, ok
	}
	var out []state.SubmitOutcome
	if err := fastjson.Unmarshal(r.Value, &out); err != nil {
		return nil, true
	}
	a := newChainAnswer(requestID, out, r.Index)
	if a.followLocal(s.state) != nil {
		return nil, true
	}
	return a.out, true
}

// chainAnswer is one submit's answer as the chain of its retries gives it.
type chainAnswer struct {
	root    string
	out     []state.SubmitOutcome // one per task of the submit
	refused []int                 // the tasks out still refuses, in order
	// index is the entry of the last answer taken: the next link's id is
	// retryID(root, index). last is the highest index taken.
	index, last uint64
}

func newChainAnswer(root string, out []state.SubmitOutcome, index uint64) *chainAnswer {
	return &chainAnswer{root: root, out: out, refused: refusedOf(out), index: index, last: index}
}

// take records a link's answer o, from the entry at index, for the tasks
// still refused (in order), and keeps those it refuses again.
func (a *chainAnswer) take(o []state.SubmitOutcome, index uint64) error {
	if len(o) != len(a.refused) {
		return &state.Error{Code: state.CodeInternal, Message: "submit: a retried answer does not match its tasks"}
	}
	still := a.refused[:0]
	for i, p := range a.refused {
		a.out[p] = o[i]
		if o[i].Outcome == state.SubmitOverloaded {
			still = append(still, p)
		}
	}
	a.refused, a.index, a.last = still, index, max(a.last, index)
	return nil
}

// followLocal takes the links st remembers, from a.index on. A link
// remembered as an error is the answer.
func (a *chainAnswer) followLocal(st *state.State) error {
	for range maxRetryLinks {
		if len(a.refused) == 0 {
			return nil
		}
		r, ok := st.RequestResult(retryID(a.root, a.index))
		if !ok {
			return nil
		}
		if r.Err != nil {
			return r.Err
		}
		var o []state.SubmitOutcome
		if err := fastjson.Unmarshal(r.Value, &o); err != nil {
			return &state.Error{Code: state.CodeInternal, Message: "decode a retried submit's answer: " + err.Error()}
		}
		if err := a.take(o, r.Index); err != nil {
			return err
		}
	}
	return nil
}

// refusedOf lists the tasks out refuses (overloaded), nil for none.
func refusedOf(out []state.SubmitOutcome) []int {
	var ps []int
	for i, o := range out {
		if o.Outcome == state.SubmitOverloaded {
			ps = append(ps, i)
		}
	}
	return ps
}
