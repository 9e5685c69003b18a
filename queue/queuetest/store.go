// Package queuetest holds in-memory doubles of the queue's collaborators,
// faithful enough for integration tests: Store enforces epoch fencing
// against a real shard map, as the replicated task table does.
package queuetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"fusebox/breakerpool"
	"fusebox/queue"
	"fusebox/shardmap"
)

// Store is an in-memory queue.Store. Complete is fenced by the epochs of the
// shard map in maps, the committed map every node would see.
type Store struct {
	maps *shardmap.Holder

	mu       sync.Mutex
	tasks    map[string]*queue.Task
	pending  map[int][]*queue.Task // pending tasks per shard, in Due order
	history  map[string][]queue.Result
	done     map[string]int // terminal tasks per destination
	subs     map[int]chan struct{}
	nextSub  int
	writes   int
	rows     int // results applied (start markers not counted)
	loaded   int // tasks handed out by Due
	passed   int // in-flight tasks Due walked past (skip said so)
	lows     map[int]time.Time
	refused  int
	failNext int
	failErr  error
	validate func(queue.Result) error // ValidateResults
	hang     chan struct{}            // HangCompletes: closed to release
	hanging  int                      // Complete calls waiting on hang
	// Blocked's row budget (SetBlockedRowBudget) and its walks
	// (BlockedWalks).
	blockedBudget, blockedCalls, blockedRows int
	blockedFrom                              time.Time
}

// NewStore returns an empty store fenced by maps.
func NewStore(maps *shardmap.Holder) *Store {
	return &Store{
		maps: maps, tasks: make(map[string]*queue.Task), pending: make(map[int][]*queue.Task),
		history: make(map[string][]queue.Result), subs: make(map[int]chan struct{}), done: make(map[string]int),
	}
}

// Add inserts tasks as the ingest API would once committed: Status pending,
// CreatedAt now and NextAttemptAt CreatedAt unless set. IDs must be new and
// shards inside the map's range.
func (s *Store) Add(tasks ...queue.Task) error {
	now := time.Now()
	m := s.maps.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tasks {
		switch {
		case t.ID == "":
			return errors.New("queuetest: task ID is required")
		case s.tasks[t.ID] != nil:
			return fmt.Errorf("queuetest: task %q already exists", t.ID)
		case m != nil && (t.Shard < 0 || t.Shard >= m.NumShards):
			return fmt.Errorf("queuetest: task %q: shard %d out of range [0, %d)", t.ID, t.Shard, m.NumShards)
		}
		if t.Status == "" {
			t.Status = queue.StatusPending
		}
		if t.CreatedAt.IsZero() {
			t.CreatedAt = now
		}
		if t.NextAttemptAt.IsZero() {
			t.NextAttemptAt = t.CreatedAt
		}
		tp := &t
		s.tasks[t.ID] = tp
		if t.Status == queue.StatusPending {
			s.insertLocked(tp)
		}
	}
	s.notifyLocked()
	return nil
}

func (s *Store) notifyLocked() {
	for _, ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// dueOrder is Due's order: NextAttemptAt, then CreatedAt, then ID.
func dueOrder(a, b *queue.Task) int {
	if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
		return c
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func (s *Store) insertLocked(t *queue.Task) {
	if cur, ok := s.lows[t.Shard]; !ok || t.NextAttemptAt.Before(cur) {
		if s.lows == nil {
			s.lows = make(map[int]time.Time)
		}
		s.lows[t.Shard] = t.NextAttemptAt
	}
	p := s.pending[t.Shard]
	i, _ := slices.BinarySearchFunc(p, t, dueOrder)
	s.pending[t.Shard] = slices.Insert(p, i, t)
}

func (s *Store) removeLocked(t *queue.Task) {
	p := s.pending[t.Shard]
	if i, ok := slices.BinarySearchFunc(p, t, dueOrder); ok {
		s.pending[t.Shard] = slices.Delete(p, i, i+1)
	}
}

// Due implements queue.Store.
func (s *Store) Due(shard int, from, now time.Time, limit int, skip func(string) bool) ([]queue.Task, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []queue.Task
	defer func() { s.loaded += len(out) }()
	for _, t := range s.pending[shard] {
		if t.NextAttemptAt.After(now) {
			return out, t.NextAttemptAt, true
		}
		if len(out) >= limit {
			return out, time.Time{}, false
		}
		if t.NextAttemptAt.Before(from) {
			continue
		}
		if skip == nil || !skip(t.ID) {
			out = append(out, *t)
		} else {
			s.passed++
		}
	}
	return out, time.Time{}, true
}

// Passed returns how many times Due walked past a task its caller has in
// flight: the reads' cost that a read cursor saves.
func (s *Store) Passed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.passed
}

// TrackedStore is a Store that also reports the tasks entering each shard's
// due order (queue.DueLowStore), as the Raft task store does. One queue per
// store: a reader takes its shard's lows.
type TrackedStore struct{ *Store }

var _ queue.DueLowStore = TrackedStore{}

// Tracked returns s as a TrackedStore.
func (s *Store) Tracked() TrackedStore { return TrackedStore{s} }

// TakeDueLow implements queue.DueLowStore.
func (t TrackedStore) TakeDueLow(shard int) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.lows[shard]
	delete(t.lows, shard)
	return at, ok
}

// Loaded returns how many tasks Due has handed out, counting each time a
// task is read again.
func (s *Store) Loaded() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// NextDue implements queue.Store.
func (s *Store) NextDue(shard int, after time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[shard]
	i, _ := slices.BinarySearchFunc(p, after, func(t *queue.Task, at time.Time) int {
		if t.NextAttemptAt.After(at) {
			return 1
		}
		return -1
	})
	if i == len(p) {
		return time.Time{}, false
	}
	return p[i].NextAttemptAt, true
}

// Backlog implements queue.Store.
func (s *Store) Backlog(shard int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending[shard])
}

// Subscribe implements queue.Store.
func (s *Store) Subscribe() (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextSub
	s.nextSub++
	ch := make(chan struct{}, 1)
	s.subs[id] = ch
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, id)
	}
}

// Complete implements queue.Store: the whole batch is refused with a
// *shardmap.WrongOwnerError unless epoch is the shard's current epoch and
// the shard has an owner; results for unknown or terminal tasks, or for
// tasks of another shard, are ignored.
func (s *Store) Complete(ctx context.Context, shard int, epoch uint64, results []queue.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	hang := s.hang
	s.mu.Unlock()
	if hang != nil {
		s.mu.Lock()
		s.hanging++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.hanging--
			s.mu.Unlock()
		}()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-hang:
		}
	}
	m := s.maps.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext > 0 {
		s.failNext--
		return s.failErr
	}
	if s.validate != nil {
		for _, r := range results {
			if err := s.validate(r); err != nil {
				return err
			}
		}
	}
	if m == nil || shard < 0 || shard >= m.NumShards {
		s.refused++
		return &shardmap.WrongOwnerError{Shard: shard}
	}
	if a := m.Shards[shard]; a.Owner == "" || a.Epoch != epoch {
		s.refused++
		return &shardmap.WrongOwnerError{Shard: shard, Owner: a.Owner, Epoch: a.Epoch}
	}
	s.writes++
	for _, r := range results {
		t := s.tasks[r.TaskID]
		if t == nil || t.Shard != shard || t.Terminal() {
			continue
		}
		if r.Started { // a start marker: not part of the task's history
			t.AttemptEpoch = epoch
			continue
		}
		s.removeLocked(t)
		*t = r.Apply(*t)
		s.rows++
		s.history[r.TaskID] = append(s.history[r.TaskID], r)
		if t.Terminal() {
			s.done[t.Destination]++
		} else {
			s.insertLocked(t)
		}
	}
	s.notifyLocked()
	return nil
}

// Done returns how many tasks of destination have reached a terminal
// status through Complete.
func (s *Store) Done(destination string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[destination]
}

// ValidateResults makes Complete refuse a whole batch, before any fence
// check, when check refuses one of its results (as the Raft store's
// proposer refuses an invalid result with state.ErrInvalidArgument).
func (s *Store) ValidateResults(check func(queue.Result) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.validate = check
}

// HangCompletes makes every Complete wait, as a database that stopped
// answering does, until its context ends or release is called.
func (s *Store) HangCompletes() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hang = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.hang = nil
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Hanging returns how many Complete calls are waiting (HangCompletes).
func (s *Store) Hanging() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hanging
}

// FailCompletes makes the next n Complete calls fail with err (transient).
func (s *Store) FailCompletes(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failErr = n, err
}

// Task returns a copy of a task.
func (s *Store) Task(id string) (queue.Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tasks[id]
	if t == nil {
		return queue.Task{}, false
	}
	return *t, true
}

// Results returns the results applied to a task, in order.
func (s *Store) Results(id string) []queue.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history[id])
}

// Count returns how many tasks have status st.
func (s *Store) Count(st string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tasks {
		if t.Status == st {
			n++
		}
	}
	return n
}

// Writes and Refused count accepted and refused Complete calls.
func (s *Store) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Rows counts the results Complete applied: the row writes a replicated
// store would make (start markers not counted).
func (s *Store) Rows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows
}

// Refused counts Complete calls refused for a stale epoch.
func (s *Store) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

var (
	_ queue.BlockedStore = (*Store)(nil)
	_ queue.LaterStore   = (*Store)(nil)
)

// Blocked implements queue.BlockedStore: the shard's pending tasks with
// Blocked > 0 and key k, ordered by (NextAttemptAt, ID) as raftstore's due
// index, after the cursor. With SetBlockedRowBudget it examines at most
// that many of the shard's pending rows per call, as raftstore does.
func (s *Store) Blocked(shard int, k breakerpool.Key, after queue.Cursor, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blockedCalls++
	if s.blockedCalls == 1 || after.At.Before(s.blockedFrom) {
		s.blockedFrom = after.At
	}
	out, last, examined, done := s.keyWalkLocked(shard, k, after, time.Time{}, limit, s.blockedBudget, skip, func(t *queue.Task) bool { return t.Blocked > 0 })
	s.blockedRows += examined
	return out, last, done
}

// SetBlockedRowBudget bounds the rows one Blocked call examines (0: no
// bound), as raftstore's state.MaxBlockedScan does: a page may then end
// short of its limit, its last cursor the last row examined.
func (s *Store) SetBlockedRowBudget(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blockedBudget = n
}

// BlockedWalks returns how many Blocked calls were made, the rows they
// examined, and the earliest position one started after.
func (s *Store) BlockedWalks() (calls, rows int, from time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blockedCalls, s.blockedRows, s.blockedFrom
}

// Later implements queue.LaterStore: the shard's pending tasks of key k
// after the cursor and due no later than until, in the same order.
func (s *Store) Later(shard int, k breakerpool.Key, after queue.Cursor, until time.Time, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out, last, _, done := s.keyWalkLocked(shard, k, after, until, limit, 0, skip, func(*queue.Task) bool { return true })
	return out, last, done
}

// keyWalkLocked walks the shard's pending rows in due order after the
// cursor (a zero cursor: from the start), examining at most rows of them
// (0: no bound), and returns up to limit tasks with key k for which match
// is true and, unless until is zero, due no later than until; examined is
// how many rows it walked.
func (s *Store) keyWalkLocked(shard int, k breakerpool.Key, after queue.Cursor, until time.Time, limit, rows int, skip func(string) bool, match func(*queue.Task) bool) (out []queue.Task, last queue.Cursor, examined int, done bool) {
	all := slices.Clone(s.pending[shard])
	slices.SortFunc(all, func(a, b *queue.Task) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	for _, t := range all {
		if c := t.NextAttemptAt.Compare(after.At); (after.ID != "" || !after.At.IsZero()) && (c < 0 || (c == 0 && t.ID <= after.ID)) {
			continue
		}
		if len(out) == limit || (rows > 0 && examined == rows) {
			return out, last, examined, false
		}
		examined++
		if rows > 0 {
			last = queue.Cursor{At: t.NextAttemptAt, ID: t.ID} // where a short page resumes
		}
		if !match(t) || queue.KeyOf(t) != k || (!until.IsZero() && t.NextAttemptAt.After(until)) || (skip != nil && skip(t.ID)) {
			continue
		}
		out = append(out, *t)
		last = queue.Cursor{At: t.NextAttemptAt, ID: t.ID}
	}
	return out, last, examined, true
}
