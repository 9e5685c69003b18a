package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"fusebox/breakerpool"
	"fusebox/queue"
	"fusebox/raftstore/state"
)

const taskCols = `id, shard, namespace_id, workflow_id, task_group, destination, destination_key,
    coalesce(request_id, ''), request, status, attempts, blocked, unexpected, next_attempt_at, created_at,
    deadline, schedule_to_close_ns, completed_at, message, http_status, operation_id, output, attempt_epoch`

func scanTask(row pgx.Row) (state.Task, error) {
	var t state.Task
	var shard, attempts, blocked, unexpected, httpStatus int32
	var deadline, completed *time.Time
	var s2c int64
	var attemptEpoch int64
	var req, output []byte
	err := row.Scan(&t.ID, &shard, &t.NamespaceID, &t.WorkflowID, &t.TaskGroup, &t.Destination, &t.DestinationKey,
		&t.RequestID, &req, &t.Status, &attempts, &blocked, &unexpected, &t.NextAttemptAt, &t.CreatedAt,
		&deadline, &s2c, &completed, &t.Message, &httpStatus, &t.OperationID, &output, &attemptEpoch)
	if err != nil {
		return t, err
	}
	t.RequestID = clientRequestID(t.RequestID)
	t.Shard, t.Attempts, t.Blocked, t.Unexpected, t.HTTPStatus = int(shard), int(attempts), int(blocked), int(unexpected), int(httpStatus)
	t.Request, t.ScheduleToClose, t.AttemptEpoch = json.RawMessage(req), time.Duration(s2c), uint64(attemptEpoch)
	if output != nil {
		t.Output = json.RawMessage(output)
	}
	t.NextAttemptAt, t.CreatedAt = t.NextAttemptAt.UTC(), t.CreatedAt.UTC()
	if deadline != nil {
		t.Deadline = deadline.UTC()
	}
	if completed != nil {
		t.CompletedAt = completed.UTC()
	}
	return t, nil
}

// Task returns the stored task id.
func (s *Store) Task(ctx context.Context, id string) (state.Task, bool, error) {
	t, err := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskCols+` FROM fusebox_tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	return t, err == nil, err
}

// duePageMax is the largest page of Due's key walk: the reader's in-flight
// tasks (up to the queue's MaxPendingPerShard, 1,000) are still pending here
// and sit at the front of the walk, so a few round trips pass over all of
// them.
const duePageMax = 4096

// Due implements queue.Store: it pages the shard's pending tasks in due
// order from `from` through the (shard, due) index, so at most one page is
// in memory besides what the reader keeps. The walk stops at the first task
// due after now: that time is the next due time (known), which spares the
// reader NextDue's query on every wake-up; a walk that runs out of tasks
// knows there is none. A failed read returns nothing (the reader tries
// again on its next wake-up).
//
// The reader's in-flight tasks are still pending here and sit at the front
// of the walk, to be passed over (skip). When the shard's last walk passed
// over any, this one walks keys only (next_attempt_at, id), then reads the
// chosen rows with one query by primary key: a skipped task costs an index
// entry, not its row sent and decoded. Otherwise (nothing was in flight
// there) the first page reads whole rows (limit + 1: the extra one is the
// next due time), so an idle shard's reader gets its batch in one round
// trip; if that page's tasks were skipped, the walk goes on by keys.
// (Starting with whole rows whenever the last walk skipped less than it
// took, or less than a quarter batch, read 76k–96k whole rows for 20k
// tasks under load: in-flight sets come and go between reads.)
func (s *Store) Due(shard int, from, now time.Time, limit int, skip func(id string) bool) ([]queue.Task, time.Time, bool) {
	return s.DueContext(context.Background(), shard, from, now, limit, skip)
}

var _ queue.ContextDueStore = (*Store)(nil)

// DueContext implements queue.ContextDueStore: Due, ended early by ctx (the
// reader's shard lost). A read ended so is not logged as a failure.
func (s *Store) DueContext(ctx context.Context, shard int, from, now time.Time, limit int, skip func(id string) bool) ([]queue.Task, time.Time, bool) {
	if limit <= 0 {
		return nil, time.Time{}, false
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	defer cancel()
	w := dueWalk{shard: shard, now: micro(now), limit: limit, skip: skip, afterAt: micro(from)}
	if from.IsZero() {
		w.afterAt = time.Unix(0, 0).UTC()
	}
	var err error
	if !s.skipHeavy(shard) {
		err = s.dueRowsFirst(ctx, &w)
	}
	if err == nil && len(w.out)+len(w.ids) < limit && !w.known {
		err = s.dueKeys(ctx, &w)
	}
	var rest []queue.Task
	if err == nil {
		rest, err = s.dueRows(ctx, shard, w.ids, w.now)
	}
	if err != nil {
		if parent.Err() == nil {
			s.readFailed("due", shard, err)
		}
		return nil, time.Time{}, false
	}
	s.noteSkips(shard, w.skipped > 0)
	if w.more {
		// Cut short by the limit: the reader must read again (from its
		// cursor, or from where this read began when that is behind it).
		return append(w.out, rest...), time.Time{}, false
	}
	return append(w.out, rest...), w.next, w.known
}

// dueWalk is one Due call's walk: where it is, and what it took.
type dueWalk struct {
	shard   int
	now     time.Time
	limit   int
	skip    func(string) bool
	afterAt time.Time
	afterID string
	out     []queue.Task // whole rows taken by the first page
	ids     []string     // keys taken by the key walk (rows read after)
	skipped int
	next    time.Time
	known   bool
	// more: the walk passed a due task it had no room for. Its page's
	// end then says nothing about the shard's end: the read is not known
	// to have reached the last due task (a reader told so took it for
	// "nothing more due" and left the tasks passed, when behind its
	// cursor, to the backstop full read).
	more bool
}

// take records a due task the walk passed; it reports whether it is taken.
func (w *dueWalk) take(at time.Time, id string) bool {
	w.afterAt, w.afterID = at, id
	if w.skip != nil && w.skip(id) {
		w.skipped++
		return false
	}
	if len(w.out)+len(w.ids) >= w.limit {
		w.more = true
		return false
	}
	return true
}

// dueRowsFirst is the walk's first page, whole rows.
func (s *Store) dueRowsFirst(ctx context.Context, w *dueWalk) error {
	rows, err := s.pool.Query(ctx, `SELECT `+taskCols+` FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND (next_attempt_at, id) > ($2, $3)
ORDER BY next_attempt_at, id LIMIT $4`, w.shard, w.afterAt, w.afterID, w.limit+1)
	if err != nil {
		return err
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return err
		}
		got++
		if t.NextAttemptAt.After(w.now) {
			w.next, w.known = t.NextAttemptAt, true // the walk went past now
			return nil
		}
		if w.take(t.NextAttemptAt, t.ID) {
			w.out = append(w.out, t)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if got <= w.limit {
		w.known = true // no pending task after these
	}
	return nil
}

// dueKeys goes on with the walk by keys only, in pages that start at twice
// the batch and grow 4× a page up to duePageMax, until the batch is full or
// the walk passes now.
func (s *Store) dueKeys(ctx context.Context, w *dueWalk) error {
	page := min(max(2*w.limit, 64), duePageMax)
	for len(w.out)+len(w.ids) < w.limit && !w.known {
		rows, err := s.pool.Query(ctx, `SELECT next_attempt_at, id FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND (next_attempt_at, id) > ($2, $3)
ORDER BY next_attempt_at, id LIMIT $4`, w.shard, w.afterAt, w.afterID, page)
		if err != nil {
			return err
		}
		got := 0
		for rows.Next() {
			var at time.Time
			var id string
			if err := rows.Scan(&at, &id); err != nil {
				rows.Close()
				return err
			}
			got++
			if at.After(w.now) {
				w.next, w.known = at.UTC(), true // the walk went past now
				break
			}
			if w.take(at, id) {
				w.ids = append(w.ids, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if !w.known && got < page {
			w.known = true // no pending task after these
		}
		page = min(4*page, duePageMax)
	}
	return nil
}

// skipHeavy reports whether the shard's last Due passed over any task (its
// next walk then starts by keys).
func (s *Store) skipHeavy(shard int) bool {
	s.dueMu.Lock()
	defer s.dueMu.Unlock()
	return s.dueSkipHeavy[shard]
}

func (s *Store) noteSkips(shard int, heavy bool) {
	s.dueMu.Lock()
	defer s.dueMu.Unlock()
	if heavy {
		s.dueSkipHeavy[shard] = true
	} else {
		delete(s.dueSkipHeavy, shard)
	}
}

// dueRows reads the rows of the tasks Due chose, in Due's order, by primary
// key only (with the shard and status in the WHERE clause a generic plan
// walks the due index and filters by id). A task that stopped being
// pending or due between the two queries (a redrive, a retention sweep) is
// left out.
func (s *Store) dueRows(ctx context.Context, shard int, ids []string, nowAt time.Time) ([]queue.Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+taskCols+` FROM fusebox_tasks WHERE id = ANY($1::text[])`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byID := make(map[string]*state.Task, len(ids))
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		if t.Shard == shard && t.Status == state.TaskPending && !t.NextAttemptAt.After(nowAt) {
			byID[t.ID] = &t
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]queue.Task, 0, len(byID))
	for _, id := range ids {
		if t := byID[id]; t != nil {
			out = append(out, *t)
		}
	}
	return out, nil
}

// NextDue implements queue.Store.
func (s *Store) NextDue(shard int, after time.Time) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	var next time.Time
	err := s.pool.QueryRow(ctx, `SELECT next_attempt_at FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND next_attempt_at > $2 ORDER BY next_attempt_at LIMIT 1`, shard, micro(after)).Scan(&next)
	if err != nil {
		return time.Time{}, false
	}
	return next.UTC(), true
}

// Backlog implements queue.Store: the shard's pending tasks (-1 when the
// database does not answer).
func (s *Store) Backlog(shard int) int {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM fusebox_tasks WHERE shard = $1 AND status = 'pending'`, shard).Scan(&n); err != nil {
		return -1
	}
	return int(n)
}

var (
	_ queue.BlockedStore = (*Store)(nil)
	_ queue.LaterStore   = (*Store)(nil)
)

// The walks of one key's pending tasks in due order, after a cursor: the
// blocked ones (Blocked), and all of them up to a due time (Later).
const (
	blockedQuery = `SELECT ` + taskCols + ` FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND blocked > 0 AND task_group = $2 AND namespace_id = $3
    AND ` + destExpr + ` = $4 AND (next_attempt_at, id) > ($5, $6)
ORDER BY next_attempt_at, id LIMIT $7`
	laterQuery = `SELECT ` + taskCols + ` FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND task_group = $2 AND namespace_id = $3
    AND ` + destExpr + ` = $4 AND (next_attempt_at, id) > ($5, $6) AND next_attempt_at <= $8
ORDER BY next_attempt_at, id LIMIT $7`
)

// Blocked implements queue.BlockedStore: the shard's pending tasks a
// breaker refused whose key is k (task group, namespace, breaker
// destination), in due order after `after`, paged like Due.
func (s *Store) Blocked(shard int, k breakerpool.Key, after queue.Cursor, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	return s.BlockedContext(context.Background(), shard, k, after, limit, skip)
}

// Later implements queue.LaterStore: the shard's pending tasks whose key is
// k, in due order after `after` and due no later than until.
func (s *Store) Later(shard int, k breakerpool.Key, after queue.Cursor, until time.Time, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	return s.LaterContext(context.Background(), shard, k, after, until, limit, skip)
}

var _ queue.ContextWalkStore = (*Store)(nil)

// BlockedContext implements queue.ContextWalkStore: Blocked, ended early by
// ctx.
func (s *Store) BlockedContext(ctx context.Context, shard int, k breakerpool.Key, after queue.Cursor, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	return s.keyWalk(ctx, "blocked", blockedQuery, shard, k, after, time.Time{}, limit, skip)
}

// LaterContext implements queue.ContextWalkStore: Later, ended early by ctx.
func (s *Store) LaterContext(ctx context.Context, shard int, k breakerpool.Key, after queue.Cursor, until time.Time, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	return s.keyWalk(ctx, "later", laterQuery, shard, k, after, until, limit, skip)
}

// keyWalk runs query (blockedQuery or laterQuery; until is $8 of the
// second) in pages of limit until limit tasks not skipped are found or the
// walk ends. A walk ended by parent is not logged as a failed read.
func (s *Store) keyWalk(parent context.Context, what, query string, shard int, k breakerpool.Key, after queue.Cursor, until time.Time, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	if limit <= 0 {
		return nil, after, false
	}
	ctx, cancel := context.WithTimeout(parent, s.cfg.QueryTimeout)
	defer cancel()
	failed := func(err error) {
		if parent.Err() == nil {
			s.readFailed(what, shard, err)
		}
	}
	afterAt, afterID := micro(after.At), after.ID
	if after.At.IsZero() {
		afterAt = time.Unix(0, 0).UTC()
	}
	var out []queue.Task
	last := after
	for {
		args := []any{shard, k.TaskGroup, k.NamespaceID, k.Destination, afterAt, afterID, limit}
		if query == laterQuery {
			args = append(args, micro(until))
		}
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			failed(err)
			return out, last, false
		}
		got := 0
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				rows.Close()
				failed(err)
				return out, last, false
			}
			got++
			afterAt, afterID = t.NextAttemptAt, t.ID
			if (skip != nil && skip(t.ID)) || len(out) >= limit {
				continue
			}
			out = append(out, t)
			last = queue.Cursor{At: t.NextAttemptAt, ID: t.ID}
		}
		rows.Close()
		if rows.Err() != nil {
			return out, last, false
		}
		if got < limit {
			return out, last, true
		}
		if len(out) >= limit {
			return out, last, false
		}
	}
}

// readFailed logs a failed read of the queue's, at most once every 5 s
// (every reader of every shard fails alike while the database is down,
// several times a second), counting the ones not logged.
func (s *Store) readFailed(what string, shard int, err error) {
	n := s.readFails.Add(1)
	s.readWarn.Do(func() {
		s.log.Warn(what+" read failed; the reader tries again at its next wake-up", "shard", shard, "err", err,
			"failed_reads_since_last_log", n)
		s.readFails.Store(0)
	})
}
