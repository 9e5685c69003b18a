package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"fusebox/queue"
	"fusebox/shardmap"
)

// Acquire records node as the owner of shard at epoch (the committed shard
// map's epoch), raising the database's epoch conditionally, as a new
// Temporal owner raises its range id. It fails with a
// *shardmap.WrongOwnerError when the database already holds a higher epoch
// (or the same epoch for another node): the map this node read is stale.
// Acquiring the epoch it already holds is a no-op.
func (s *Store) Acquire(ctx context.Context, shard int, node string, epoch uint64) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
INSERT INTO fusebox_shards (shard, epoch, owner) VALUES ($1, $2, $3)
ON CONFLICT (shard) DO UPDATE SET epoch = excluded.epoch, owner = excluded.owner
WHERE fusebox_shards.epoch < excluded.epoch`, shard, int64(epoch), node)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		cur, err := currentOwner(ctx, tx, shard)
		if err != nil {
			return err
		}
		if cur.Epoch == epoch && cur.Owner == node {
			return nil
		}
		return cur
	})
}

func currentOwner(ctx context.Context, tx querier, shard int) (*shardmap.WrongOwnerError, error) {
	var epoch int64
	var owner string
	err := tx.QueryRow(ctx, `SELECT epoch, owner FROM fusebox_shards WHERE shard = $1`, shard).Scan(&epoch, &owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return &shardmap.WrongOwnerError{Shard: shard}, nil
	}
	if err != nil {
		return nil, err
	}
	return &shardmap.WrongOwnerError{Shard: shard, Owner: owner, Epoch: uint64(epoch)}, nil
}

// Complete implements queue.Store with one statement, so one round trip
// and one commit: its first part locks the shard's row at epoch (an UPDATE
// that matches only the current epoch: a new owner's Acquire either
// committed before, and nothing matches, or waits for this statement's
// commit); the task rows are written — results and start markers, one
// UPDATE over unnest'ed arrays — only if that matched (a one-time filter
// on the fence, evaluated before any task row is touched). A stale epoch
// refuses the whole batch with a *shardmap.WrongOwnerError carrying the
// database's owner and epoch; the queue then drops the shard. Results for
// unknown, other-shard or terminal tasks are ignored.
func (s *Store) Complete(ctx context.Context, shard int, epoch uint64, results []queue.Result) error {
	if len(results) == 0 {
		return nil
	}
	now := micro(time.Now())
	last := make(map[string]int, len(results))
	for i, r := range results {
		if !r.Started {
			last[r.TaskID] = i // a later result of the same task wins, as in log order
		}
	}
	n := len(results)
	ids, statuses, msgs, ops := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	attempts, blocked, unexpected, httpStatus := make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	nexts, marks := make([]time.Time, 0, n), make([]bool, 0, n)
	outputs := make([][]byte, 0, n)
	marked := make(map[string]bool)
	for i, r := range results {
		if r.Started {
			// A start marker of a task with a result in this batch is
			// overwritten by the result (attempt_epoch 0); one row is
			// written once per statement, so it is left out.
			if _, done := last[r.TaskID]; done || marked[r.TaskID] {
				continue
			}
			marked[r.TaskID] = true
			ids, statuses, msgs, ops = append(ids, r.TaskID), append(statuses, ""), append(msgs, ""), append(ops, "")
			attempts, blocked, unexpected, httpStatus = append(attempts, 0), append(blocked, 0), append(unexpected, 0), append(httpStatus, 0)
			nexts, marks, outputs = append(nexts, now), append(marks, true), append(outputs, nil)
			continue
		}
		if last[r.TaskID] != i {
			continue
		}
		ids, statuses, msgs, ops = append(ids, r.TaskID), append(statuses, r.Status), append(msgs, r.Message), append(ops, r.OperationID)
		attempts, blocked, unexpected, httpStatus = append(attempts, int32(r.Attempts)), append(blocked, int32(r.Blocked)), append(unexpected, int32(r.Unexpected)), append(httpStatus, int32(r.HTTPStatus))
		next := r.NextAttemptAt
		if next.IsZero() {
			next = now
		}
		nexts, marks, outputs = append(nexts, micro(next)), append(marks, false), append(outputs, r.Output)
	}
	var ended int
	err := s.retry(ctx, func() error {
		var fenced int
		if err := s.pool.QueryRow(ctx, completeSQL, shard, int64(epoch), ids, statuses, attempts, blocked, unexpected,
			msgs, httpStatus, ops, nexts, now, outputs, marks).Scan(&fenced, &ended); err != nil {
			return err
		}
		if fenced == 1 {
			return nil
		}
		cur, err := currentOwner(ctx, s.pool, shard)
		if err != nil {
			return err
		}
		return cur
	})
	if err == nil {
		// No notify: only the shard's owner writes its results, and its
		// queue wakes its own reader after each write; waking every reader
		// of the node here made each of them query again per write.
		// The pending count reused by the submit limits moves by the tasks
		// that ended here (dropping it made the next submit count every
		// pending task again, once per flush).
		s.pending.add(-ended)
	}
	return err
}

// completeSQL is Complete's statement. A row of the arrays is a result, or
// a start marker (mark: the attempt's epoch is recorded, nothing else
// changes). It returns whether the fence matched and how many tasks ended
// (left pending). One UPDATE of the task table, not two: CockroachDB refuses a
// statement that modifies a table twice.
const completeSQL = `
WITH fence AS (
    UPDATE fusebox_shards SET epoch = epoch WHERE shard = $1 AND epoch = $2 RETURNING shard
), written AS (
    UPDATE fusebox_tasks AS t SET
        status = CASE WHEN r.mark THEN t.status ELSE r.status END,
        attempts = CASE WHEN r.mark THEN t.attempts ELSE r.attempts END,
        blocked = CASE WHEN r.mark THEN t.blocked ELSE r.blocked END,
        unexpected = CASE WHEN r.mark THEN t.unexpected ELSE r.unexpected END,
        message = CASE WHEN r.mark THEN t.message ELSE r.message END,
        http_status = CASE WHEN r.mark THEN t.http_status ELSE r.http_status END,
        attempt_epoch = CASE WHEN r.mark THEN $2 ELSE 0 END,
        operation_id = CASE WHEN NOT r.mark AND r.op <> '' THEN r.op ELSE t.operation_id END,
        output = CASE WHEN NOT r.mark AND r.output IS NOT NULL THEN r.output ELSE t.output END,
        next_attempt_at = CASE WHEN r.mark OR r.status <> 'pending' THEN t.next_attempt_at
            WHEN t.deadline IS NOT NULL AND r.next > t.deadline THEN t.deadline ELSE r.next END,
        completed_at = CASE WHEN r.mark THEN t.completed_at WHEN r.status <> 'pending' THEN $12::timestamptz ELSE NULL END
    FROM unnest($3::text[], $4::text[], $5::int[], $6::int[], $7::int[], $8::text[], $9::int[], $10::text[],
        $11::timestamptz[], $13::bytea[], $14::bool[]) AS r(id, status, attempts, blocked, unexpected, message, http_status, op, next, output, mark)
    WHERE t.id = r.id AND t.shard = $1 AND t.status = 'pending' AND EXISTS (SELECT 1 FROM fence)
    RETURNING NOT r.mark AND r.status <> 'pending' AS ended
)
SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM written WHERE ended)`

var _ queue.Store = (*Store)(nil)
