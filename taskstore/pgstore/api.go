package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"fusebox/raftstore/state"
)

// The API's reads and writes beyond the queue's (the task routes, the DLQ,
// shard stats, retention), with the raft store's semantics; the shared
// suite (taskstore/storetest) holds both stores to them.

// ListTasksPage returns tasks in id order matching q (shard, status —
// state.TaskStatusBlocked for the blocked pending tasks —, after an
// id), at most q.Limit, and the next page's cursor: the last id when the
// page is full, else empty (as the raft store pages).
func (s *Store) ListTasksPage(ctx context.Context, q state.TaskQuery) ([]state.Task, string, error) {
	if q.Limit <= 0 {
		return nil, "", nil
	}
	sql, args := listSQL(q)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []state.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	if len(out) == q.Limit {
		return out, out[len(out)-1].ID, nil
	}
	return out, "", nil
}

// listSQL is ListTasksPage's statement for q and its arguments.
func listSQL(q state.TaskQuery) (string, []any) {
	where := []string{"id > $1"}
	args := []any{q.After}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	switch q.Status {
	case "":
	case state.TaskStatusBlocked:
		where = append(where, "status = 'pending' AND blocked > 0")
	case state.TaskPending, state.TaskSucceeded, state.TaskFailed, state.TaskDLQ:
		// A known status is written into the statement (one of these
		// constants, never the caller's text), so each status has its own
		// prepared statement and plan: a generic plan of `status = $2`
		// cannot use the partial status indexes and walks every task in
		// id order to find a sparse status.
		where = append(where, "status = '"+q.Status+"'")
	default:
		where = append(where, "status = "+arg(q.Status))
	}
	if q.Shard != nil {
		where = append(where, "shard = "+arg(int32(*q.Shard)))
	}
	return `SELECT ` + taskCols + ` FROM fusebox_tasks WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id LIMIT ` + arg(q.Limit), args
}

// Redrive moves dead-lettered tasks back to pending, due at `at`, with
// their attempt counts reset and their schedule-to-close deadline started
// again: the tasks ids (others and unknown ids are passed over), or with
// all the first state.MaxRedriveBatch in id order (More set when
// there are others). Like the raft store's redrive it is not fenced: a
// dead-lettered task has no owner write in flight.
func (s *Store) Redrive(ctx context.Context, ids []string, all bool, at time.Time) (state.RedriveOutcome, error) {
	at = micro(at)
	out := state.RedriveOutcome{Redriven: []string{}}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = state.RedriveOutcome{Redriven: []string{}}
		pick := ids
		if all {
			rows, err := tx.Query(ctx, `SELECT id FROM fusebox_tasks WHERE status = 'dlq' ORDER BY id LIMIT $1`, state.MaxRedriveBatch+1)
			if err != nil {
				return err
			}
			pick, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if len(pick) > state.MaxRedriveBatch {
				pick, out.More = pick[:state.MaxRedriveBatch], true
			}
		}
		if len(pick) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, `
UPDATE fusebox_tasks SET status = 'pending', attempts = 0, blocked = 0, unexpected = 0, attempt_epoch = 0,
    next_attempt_at = $2, completed_at = NULL,
    deadline = CASE WHEN deadline IS NULL THEN NULL
        ELSE $2::timestamptz + (schedule_to_close_ns / 1000) * interval '1 microsecond' END
WHERE id = ANY($1::text[]) AND status = 'dlq'
RETURNING id`, pick, at)
		if err != nil {
			return err
		}
		out.Redriven, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return state.RedriveOutcome{}, err
	}
	slices.Sort(out.Redriven)
	if out.Redriven == nil {
		out.Redriven = []string{}
	}
	if len(out.Redriven) > 0 {
		s.pending.drop()
		s.wroteLows(nil) // every shard read whole: redrives are rare
	}
	return out, nil
}

// ShardStats is a shard's backlog (pending tasks) and the creation time
// of its oldest pending task (zero when none).
func (s *Store) ShardStats(ctx context.Context, shard int) (backlog int, oldest time.Time, err error) {
	var n int64
	var min *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM fusebox_tasks WHERE shard = $1 AND status = 'pending'`,
		shard).Scan(&n, &min); err != nil {
		return 0, time.Time{}, err
	}
	if min != nil {
		oldest = min.UTC()
	}
	return int(n), oldest, nil
}

// Collect deletes up to limit succeeded and failed tasks (dead-lettered
// ones stay, as in the raft store) completed before `before` (oldest first); more is true when it
// stopped at limit.
func (s *Store) Collect(ctx context.Context, before time.Time, limit int) (deleted int, more bool, err error) {
	if limit <= 0 || limit > state.MaxCollectBatch {
		limit = state.MaxCollectBatch
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM fusebox_tasks WHERE id IN (
    SELECT id FROM fusebox_tasks WHERE status IN ('succeeded', 'failed') AND completed_at < $1
    ORDER BY completed_at LIMIT $2)`,
		micro(before), limit)
	if err != nil {
		return 0, false, err
	}
	n := int(tag.RowsAffected())
	return n, n == limit, nil
}

// RunCollector deletes terminal tasks older than retention() every
// interval until ctx ends (the node runs it on the Raft leader, so one
// node collects). Errors are logged and retried at the next tick.
func (s *Store) RunCollector(ctx context.Context, interval time.Duration, retention func() time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := time.Now().Add(-retention())
		for {
			n, more, err := s.Collect(ctx, before, state.MaxCollectBatch)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("task collection failed", "err", err)
				}
				break
			}
			if n > 0 {
				s.log.Log(ctx, slog.LevelDebug, "collected terminal tasks", "deleted", n)
			}
			if !more || ctx.Err() != nil {
				break
			}
		}
	}
}

// CountStatus is how many of the tasks ids have status (benchmarks and
// tests waiting for a batch to finish).
func (s *Store) CountStatus(ctx context.Context, ids []string, status string) (int, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM fusebox_tasks WHERE id = ANY($1::text[]) AND status = $2`, ids, status).Scan(&n)
	return int(n), err
}
