package pgstore

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

type groupedComplete struct {
	shard   int
	epoch   uint64
	results []queue.Result
}

// coalesce runs calls as one group: a write of shard 0 is held in flight
// (its fence row locked by another transaction) while calls queue behind
// it, then let go. It returns each call's error and the transactions the
// store committed for them (the held write's included).
func coalesce(t *testing.T, s *Store, held queue.Result, calls []groupedComplete) ([]error, int64) {
	t.Helper()
	ctx := t.Context()
	txs := s.completes.txs.Load()
	lock, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `SELECT 1 FROM fusebox_shards WHERE shard = 0 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	heldErr := make(chan error, 1)
	go func() { heldErr <- s.Complete(ctx, 0, 1, []queue.Result{held}) }()
	testwait.For(t, 20*time.Second, "the held write to lead", func() bool {
		s.completes.mu.Lock()
		defer s.completes.mu.Unlock()
		return s.completes.leading && len(s.completes.queue) == 0
	})
	errs := make([]error, len(calls))
	done := make(chan int, len(calls))
	for i, c := range calls {
		go func() { errs[i] = s.Complete(ctx, c.shard, c.epoch, c.results); done <- i }()
	}
	testwait.For(t, 20*time.Second, "the calls to queue", func() bool { return s.completes.queued() == len(calls) })
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-heldErr; err != nil {
		t.Fatalf("the held write: %v", err)
	}
	for range calls {
		<-done
	}
	return errs, s.completes.txs.Load() - txs
}

// groupTasks acquires shards 0–3 at epoch 1 and submits two tasks in each.
func groupTasks(t *testing.T, s *Store) map[int][2]state.NewTask {
	t.Helper()
	ctx := t.Context()
	tasks := make(map[int][2]state.NewTask)
	var all []state.NewTask
	for shard := range 4 {
		if err := s.Acquire(ctx, shard, "n1", 1); err != nil {
			t.Fatal(err)
		}
		pair := [2]state.NewTask{wakeTask(10*shard+1, shard), wakeTask(10*shard+2, shard)}
		tasks[shard] = pair
		all = append(all, pair[:]...)
	}
	if _, err := s.Submit(ctx, all, time.Now()); err != nil {
		t.Fatal(err)
	}
	return tasks
}

func succeeded(id string) queue.Result {
	return queue.Result{TaskID: id, Status: queue.StatusSucceeded, Attempts: 1, HTTPStatus: 200}
}

func wantStatus(t *testing.T, s *Store, id string, want string) {
	t.Helper()
	tk, ok, err := s.Task(t.Context(), id)
	if err != nil || !ok || tk.Status != want {
		t.Fatalf("task %s: %+v %v %v, want %s", id, tk, ok, err, want)
	}
}

// Concurrent completes of several shards, and two of one shard, that
// queue behind a write in flight go in one transaction: the held write's
// and the group's, two commits for five calls, and every result lands.
func TestConcurrentCompletesShareOneTransaction(t *testing.T) {
	s := openTest(t)
	tasks := groupTasks(t, s)
	errs, txs := coalesce(t, s, succeeded(tasks[0][0].ID), []groupedComplete{
		{1, 1, []queue.Result{succeeded(tasks[1][0].ID)}},
		{2, 1, []queue.Result{{TaskID: tasks[2][0].ID, Started: true}, succeeded(tasks[2][0].ID)}},
		{1, 1, []queue.Result{succeeded(tasks[1][1].ID)}},
		{3, 1, []queue.Result{{TaskID: tasks[3][0].ID, Status: queue.StatusDLQ, Message: "poison"}, succeeded(tasks[3][1].ID)}},
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if txs != 2 {
		t.Fatalf("%d write transactions for the held write and a group of four, want 2", txs)
	}
	for _, id := range []string{tasks[0][0].ID, tasks[1][0].ID, tasks[1][1].ID, tasks[2][0].ID, tasks[3][1].ID} {
		wantStatus(t, s, id, state.TaskSucceeded)
	}
	wantStatus(t, s, tasks[3][0].ID, state.TaskDLQ)
	wantStatus(t, s, tasks[2][1].ID, state.TaskPending)
	// The database's view: the group's rows were written by one
	// transaction (one xmin), not the held write's.
	var xids int
	var sameAsHeld bool
	if err := s.pool.QueryRow(t.Context(), `
SELECT count(DISTINCT xmin::text), bool_or(xmin::text = (SELECT xmin::text FROM fusebox_tasks WHERE id = $2))
FROM fusebox_tasks WHERE id = ANY($1)`,
		[]string{tasks[1][0].ID, tasks[1][1].ID, tasks[2][0].ID, tasks[3][0].ID, tasks[3][1].ID}, tasks[0][0].ID).Scan(&xids, &sameAsHeld); err != nil {
		t.Fatal(err)
	}
	if xids != 1 || sameAsHeld {
		t.Fatalf("the group's rows were written by %d transactions (the held write's among them: %v), want 1", xids, sameAsHeld)
	}
}

// A coalesced group in which one shard was taken by another owner (its
// epoch raised): that caller alone gets the typed ownership error and its
// results do not land; the other shards' results, in the same
// transaction, do.
func TestCoalescedCompleteFencesEachShard(t *testing.T) {
	s := openTest(t)
	tasks := groupTasks(t, s)
	if err := s.Acquire(t.Context(), 2, "n2", 2); err != nil {
		t.Fatal(err)
	}
	errs, txs := coalesce(t, s, succeeded(tasks[0][0].ID), []groupedComplete{
		{1, 1, []queue.Result{succeeded(tasks[1][0].ID)}},
		{2, 1, []queue.Result{{TaskID: tasks[2][1].ID, Started: true}, succeeded(tasks[2][0].ID)}},
		{3, 1, []queue.Result{succeeded(tasks[3][0].ID)}},
	})
	var woe *shardmap.WrongOwnerError
	if errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &woe) || woe.Shard != 2 || woe.Owner != "n2" || woe.Epoch != 2 {
		t.Fatalf("errors %v, want only shard 2's, owned by n2 at epoch 2", errs)
	}
	if txs != 2 {
		t.Fatalf("%d write transactions, want 2 (the held write, the group)", txs)
	}
	wantStatus(t, s, tasks[1][0].ID, state.TaskSucceeded)
	wantStatus(t, s, tasks[3][0].ID, state.TaskSucceeded)
	wantStatus(t, s, tasks[2][0].ID, state.TaskPending)
	if tk, _, _ := s.Task(t.Context(), tasks[2][1].ID); tk.AttemptEpoch != 0 {
		t.Fatalf("a fenced start marker landed: %+v", tk)
	}
}

// A statement that fails aborts the group's transaction; every call is
// then written alone, so only the failing caller gets the error.
func TestCoalescedCompleteFailureGoesAlone(t *testing.T) {
	s := openTest(t)
	tasks := groupTasks(t, s)
	errs, txs := coalesce(t, s, succeeded(tasks[0][0].ID), []groupedComplete{
		{1, 1, []queue.Result{succeeded(tasks[1][0].ID)}},
		{3, 1, []queue.Result{{TaskID: tasks[3][0].ID, Status: queue.StatusDLQ, Message: "bad \xff utf-8"}}},
		{2, 1, []queue.Result{succeeded(tasks[2][0].ID)}},
	})
	var pe *pgconn.PgError
	if errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &pe) {
		t.Fatalf("errors %v, want only shard 3's (a database error)", errs)
	}
	if txs != 3 {
		t.Fatalf("%d write transactions, want 3 (the held write, then two alone)", txs)
	}
	wantStatus(t, s, tasks[1][0].ID, state.TaskSucceeded)
	wantStatus(t, s, tasks[2][0].ID, state.TaskSucceeded)
	wantStatus(t, s, tasks[3][0].ID, state.TaskPending)
}
