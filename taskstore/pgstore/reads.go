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

// Due implements queue.Store: it pages the shard's pending tasks in due
// order from `from` through the (shard, due) index, limit rows a page, so at
// most one page is in memory besides what the reader keeps. The walk stops
// at the first row due after now: that row's time is the next due time
// (known), which spares the reader NextDue's query on every wake-up; a walk
// that runs out of rows knows there is none. A failed read returns nothing
// (the reader tries again on its next wake-up).
func (s *Store) Due(shard int, from, now time.Time, limit int, skip func(id string) bool) ([]queue.Task, time.Time, bool) {
	if limit <= 0 {
		return nil, time.Time{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	var out []queue.Task
	afterAt, afterID := micro(from), ""
	if from.IsZero() {
		afterAt = time.Unix(0, 0).UTC()
	}
	nowAt := micro(now)
	for len(out) < limit {
		rows, err := s.pool.Query(ctx, `SELECT `+taskCols+` FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND (next_attempt_at, id) > ($2, $3)
ORDER BY next_attempt_at, id LIMIT $4`, shard, afterAt, afterID, limit)
		if err != nil {
			s.readFailed("due", shard, err)
			return out, time.Time{}, false
		}
		got := 0
		var next time.Time
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				rows.Close()
				s.readFailed("due", shard, err)
				return out, time.Time{}, false
			}
			got++
			if t.NextAttemptAt.After(nowAt) {
				next = t.NextAttemptAt.UTC() // the walk went past now
				break
			}
			afterAt, afterID = t.NextAttemptAt, t.ID
			if (skip != nil && skip(t.ID)) || len(out) >= limit {
				continue
			}
			out = append(out, toQueueTask(&t))
		}
		rows.Close()
		switch {
		case rows.Err() != nil:
			return out, time.Time{}, false
		case !next.IsZero():
			return out, next, true
		case got < limit:
			return out, time.Time{}, true // no pending task after these
		}
	}
	return out, time.Time{}, false
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

var _ queue.BlockedStore = (*Store)(nil)

// Blocked implements queue.BlockedStore: the shard's pending tasks a
// breaker refused whose key is k (task group, namespace, breaker
// destination), in due order after `after`, paged like Due.
func (s *Store) Blocked(shard int, k breakerpool.Key, after queue.Cursor, limit int, skip func(string) bool) ([]queue.Task, queue.Cursor, bool) {
	if limit <= 0 {
		return nil, after, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	afterAt, afterID := micro(after.At), after.ID
	if after.At.IsZero() {
		afterAt = time.Unix(0, 0).UTC()
	}
	var out []queue.Task
	last := after
	for {
		rows, err := s.pool.Query(ctx, `SELECT `+taskCols+` FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND blocked > 0 AND task_group = $2 AND namespace_id = $3
    AND `+destExpr+` = $4 AND (next_attempt_at, id) > ($5, $6)
ORDER BY next_attempt_at, id LIMIT $7`, shard, k.TaskGroup, k.NamespaceID, k.Destination, afterAt, afterID, limit)
		if err != nil {
			s.readFailed("blocked", shard, err)
			return out, last, false
		}
		got := 0
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				rows.Close()
				s.readFailed("blocked", shard, err)
				return out, last, false
			}
			got++
			afterAt, afterID = t.NextAttemptAt, t.ID
			if (skip != nil && skip(t.ID)) || len(out) >= limit {
				continue
			}
			out = append(out, toQueueTask(&t))
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
