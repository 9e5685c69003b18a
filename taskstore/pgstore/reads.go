package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"fusebox/breakerpool"
	"fusebox/queue"
	"fusebox/raftstore"
)

const taskCols = `id, shard, namespace_id, workflow_id, task_group, destination, destination_key,
    coalesce(request_id, ''), request, status, attempts, blocked, unexpected, next_attempt_at, created_at,
    deadline, schedule_to_close_ns, completed_at, message, http_status, operation_id, output, attempt_epoch`

func scanTask(row pgx.Row) (raftstore.Task, error) {
	var t raftstore.Task
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
func (s *Store) Task(ctx context.Context, id string) (raftstore.Task, bool, error) {
	t, err := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskCols+` FROM fusebox_tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	return t, err == nil, err
}

// Due's walk reads keys in pages that start at twice the batch (room for
// the next due time and a few skipped keys) and grow 4× a page up to
// duePageMax: the reader's in-flight tasks (up to the queue's
// MaxPendingPerShard, 1,000) are still pending here and sit at the front of
// the walk, so a few round trips pass over all of them.
const duePageMax = 4096

// Due implements queue.Store: it pages the shard's pending tasks in due
// order from `from` through the (shard, due) index, so at most one page is
// in memory besides what the reader keeps. It walks keys only
// (next_attempt_at, id), passing over the ones skip names (the reader's
// in-flight tasks, still pending here), then reads the rows of the chosen
// ones with one query by primary key: a skipped task costs an index entry,
// not its row's request sent and decoded. The walk stops at the first key
// due after now: that time is the next due time (known), which spares the
// reader NextDue's query on every wake-up; a walk that runs out of keys
// knows there is none. A failed read returns nothing (the reader tries
// again on its next wake-up).
func (s *Store) Due(shard int, from, now time.Time, limit int, skip func(id string) bool) ([]queue.Task, time.Time, bool) {
	if limit <= 0 {
		return nil, time.Time{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	afterAt, afterID := micro(from), ""
	if from.IsZero() {
		afterAt = time.Unix(0, 0).UTC()
	}
	nowAt := micro(now)
	page := min(max(2*limit, 64), duePageMax)
	var ids []string
	var next time.Time
	known := false
	for len(ids) < limit && !known {
		rows, err := s.pool.Query(ctx, `SELECT next_attempt_at, id FROM fusebox_tasks
WHERE shard = $1 AND status = 'pending' AND (next_attempt_at, id) > ($2, $3)
ORDER BY next_attempt_at, id LIMIT $4`, shard, afterAt, afterID, page)
		if err != nil {
			s.readFailed("due", shard, err)
			return nil, time.Time{}, false
		}
		got := 0
		for rows.Next() {
			var at time.Time
			var id string
			if err := rows.Scan(&at, &id); err != nil {
				rows.Close()
				s.readFailed("due", shard, err)
				return nil, time.Time{}, false
			}
			got++
			if at.After(nowAt) {
				next, known = at.UTC(), true // the walk went past now
				break
			}
			afterAt, afterID = at, id
			if len(ids) < limit && (skip == nil || !skip(id)) {
				ids = append(ids, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			s.readFailed("due", shard, err)
			return nil, time.Time{}, false
		}
		if !known && got < page {
			known = true // no pending task after these
		}
		page = min(4*page, duePageMax)
	}
	out, err := s.dueRows(ctx, shard, ids, nowAt)
	if err != nil {
		s.readFailed("due", shard, err)
		return nil, time.Time{}, false
	}
	return out, next, known
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
	byID := make(map[string]*raftstore.Task, len(ids))
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		if t.Shard == shard && t.Status == raftstore.TaskPending && !t.NextAttemptAt.After(nowAt) {
			byID[t.ID] = &t
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]queue.Task, 0, len(byID))
	for _, id := range ids {
		if t := byID[id]; t != nil {
			out = append(out, toQueueTask(t))
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
