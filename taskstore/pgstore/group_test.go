package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"fusebox/raftstore/state"
)

// Concurrent submits are committed in groups and each caller gets its own
// outcomes: 40 callers, each submitting 3 tasks of which one request id
// is shared by all callers, get 80 accepted private tasks, and for the
// shared request id exactly one accepted task that every other caller's
// outcome names as the duplicate; every task is stored due at its own
// caller's time; a caller whose context is cancelled does not fail the
// others.
func TestSubmitGroupsConcurrentCallers(t *testing.T) {
	s := openTest(t)
	const callers = 40
	base := micro(time.Now().Add(-time.Minute))
	mk := func(c, i int, rid string) state.NewTask {
		return state.NewTask{
			ID: fmt.Sprintf("%016x%04x%012x", base.UnixNano(), c, i), Shard: (c + i) % 4, NamespaceID: "ns",
			WorkflowID: fmt.Sprintf("wf-%d-%d", c, i), TaskGroup: "callbacks.Invocation", Destination: "https://example.com/cb",
			RequestID: rid, Request: []byte(`{}`), MaxDestinationBacklog: 1000, MaxPendingTasks: 1000,
		}
	}
	outs := make([][]state.SubmitOutcome, callers)
	errs := make([]error, callers)
	ats := make([]time.Time, callers)
	var wg sync.WaitGroup
	for c := range callers {
		ats[c] = base.Add(time.Duration(c) * time.Millisecond)
		tasks := []state.NewTask{mk(c, 0, fmt.Sprintf("own-%d", c)), mk(c, 1, "shared"), mk(c, 2, "")}
		ctx := t.Context()
		if c == 7 {
			cctx, cancel := context.WithCancel(ctx)
			cancel() // this caller gives up at once
			ctx = cctx
		}
		wg.Go(func() { outs[c], errs[c] = s.Submit(ctx, tasks, ats[c]) })
	}
	wg.Wait()
	var sharedID string
	accepted, sharedAccepted := 0, 0
	for c := range callers {
		if c == 7 {
			continue // cancelled: an error, or outcomes if its group had already gone
		}
		if errs[c] != nil || len(outs[c]) != 3 {
			t.Fatalf("caller %d: %v %+v", c, errs[c], outs[c])
		}
		for i, o := range outs[c] {
			switch {
			case i == 1 && o.Outcome == state.SubmitAccepted:
				sharedAccepted++
				sharedID = o.TaskID
			case i == 1:
				if o.Outcome != state.SubmitDuplicate {
					t.Fatalf("caller %d shared task: %+v", c, o)
				}
			case o.Outcome != state.SubmitAccepted || o.TaskID != mk(c, i, "").ID:
				t.Fatalf("caller %d task %d: %+v", c, i, o)
			default:
				accepted++
			}
		}
	}
	if accepted != 2*(callers-1) || sharedAccepted > 1 {
		t.Fatalf("%d private tasks accepted, shared accepted %d times", accepted, sharedAccepted)
	}
	if sharedID == "" { // caller 7's task won the shared id
		sharedID = outs[7][1].TaskID
	}
	for c := range callers {
		if c != 7 && outs[c][1].TaskID != sharedID {
			t.Fatalf("caller %d's shared outcome names %s, want %s", c, outs[c][1].TaskID, sharedID)
		}
		got, ok, err := s.Task(t.Context(), mk(c, 2, "").ID)
		if c != 7 && (err != nil || !ok || !got.CreatedAt.Equal(ats[c]) || !got.NextAttemptAt.Equal(ats[c])) {
			t.Fatalf("caller %d's task: %+v %v %v, want due at %v", c, got, ok, err, ats[c])
		}
	}
}

// A submit through another node's store wakes this store's subscribers
// through the newest-id check (WakeInterval), with no local write and the
// full poll an hour away.

// A submit whose request id was kept out by a stored task that retention
// deleted before its duplicate could be read is inserted after all: its
// outcome was empty (answered 202 with no task id) and nothing was stored.
func TestSubmitWhenTheDuplicateVanishes(t *testing.T) {
	s := openTest(t)
	at := micro(time.Now())
	mk := func(id string) state.NewTask {
		return state.NewTask{ID: id, Shard: 1, NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "callbacks.Invocation",
			Destination: "https://example.com/cb", RequestID: "r1", Request: []byte(`{}`), MaxDestinationBacklog: 1000, MaxPendingTasks: 1000}
	}
	first := fmt.Sprintf("%016x%016x", at.UnixNano(), 1)
	if out, err := s.Submit(t.Context(), []state.NewTask{mk(first)}, at); err != nil || out[0].Outcome != state.SubmitAccepted {
		t.Fatalf("first submit: %+v, %v", out, err)
	}
	once := sync.Once{}
	afterInsertHook = func() {
		once.Do(func() {
			if _, err := s.pool.Exec(context.Background(), `DELETE FROM fusebox_tasks WHERE id = $1`, first); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() { afterInsertHook = nil })
	second := fmt.Sprintf("%016x%016x", at.UnixNano(), 2)
	out, err := s.Submit(t.Context(), []state.NewTask{mk(second)}, at)
	if err != nil || len(out) != 1 || out[0].Outcome != state.SubmitAccepted || out[0].TaskID != second {
		t.Fatalf("submit after the duplicate vanished: %+v, %v; want %s accepted", out, err, second)
	}
	if _, ok, err := s.Task(t.Context(), second); err != nil || !ok {
		t.Fatalf("task %s not stored: %v", second, err)
	}
}

// The read of stored duplicates after a committed INSERT is tried again
// when it fails: its error reported the whole submit as not committed,
// though its new tasks were, and a client retry stored them twice. A
// cancelled caller stops the tries.
func TestReadAfterCommitRetries(t *testing.T) {
	s := &Store{log: slog.New(slog.DiscardHandler)}
	calls := 0
	err := s.readAfterCommit(t.Context(), func() error {
		if calls++; calls < 3 {
			return errors.New("conn closed")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("read failing twice: %v after %d calls, want nil after 3", err, calls)
	}
	calls = 0
	if err := s.readAfterCommit(t.Context(), func() error { calls++; return errors.New("down") }); err == nil || calls != 5 {
		t.Fatalf("read always failing: %v after %d calls, want its error after 5", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	calls = 0
	err = s.readAfterCommit(ctx, func() error { calls++; cancel(); return errors.New("down") })
	if err == nil || calls != 1 {
		t.Fatalf("cancelled caller: %v after %d calls, want its error after 1", err, calls)
	}
}
