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

func currentOwner(ctx context.Context, tx pgx.Tx, shard int) (*shardmap.WrongOwnerError, error) {
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

// Complete implements queue.Store. In one transaction it first locks the
// shard's row at epoch (an UPDATE that matches only the current epoch: a
// new owner's Acquire either committed before, and nothing matches, or
// waits for this transaction), then writes start markers and results with
// one statement each. A stale epoch refuses the whole batch with a
// *shardmap.WrongOwnerError carrying the database's owner and epoch; the
// queue then drops the shard. Results for unknown, other-shard or terminal
// tasks are ignored.
func (s *Store) Complete(ctx context.Context, shard int, epoch uint64, results []queue.Result) error {
	if len(results) == 0 {
		return nil
	}
	now := micro(time.Now())
	var marks []string
	last := make(map[string]int, len(results))
	for i, r := range results {
		if r.Started {
			marks = append(marks, r.TaskID)
			continue
		}
		last[r.TaskID] = i // a later result of the same task wins, as in log order
	}
	n := len(last)
	ids, statuses, msgs, ops := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	attempts, blocked, unexpected, httpStatus := make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	nexts := make([]time.Time, 0, n)
	outputs := make([][]byte, 0, n)
	for i, r := range results {
		if r.Started || last[r.TaskID] != i {
			continue
		}
		ids, statuses, msgs, ops = append(ids, r.TaskID), append(statuses, string(r.Status)), append(msgs, r.Message), append(ops, r.OperationID)
		attempts, blocked, unexpected, httpStatus = append(attempts, int32(r.Attempts)), append(blocked, int32(r.Blocked)), append(unexpected, int32(r.Unexpected)), append(httpStatus, int32(r.HTTPStatus))
		next := r.NextAttemptAt
		if next.IsZero() {
			next = now
		}
		nexts, outputs = append(nexts, micro(next)), append(outputs, r.Output)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE fusebox_shards SET epoch = epoch WHERE shard = $1 AND epoch = $2`, shard, int64(epoch))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			cur, err := currentOwner(ctx, tx, shard)
			if err != nil {
				return err
			}
			return cur
		}
		if len(marks) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE fusebox_tasks SET attempt_epoch = $3
WHERE shard = $1 AND status = 'pending' AND id = ANY($2::text[])`, shard, marks, int64(epoch)); err != nil {
				return err
			}
		}
		if len(ids) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `
UPDATE fusebox_tasks AS t SET
    status = r.status, attempts = r.attempts, blocked = r.blocked, unexpected = r.unexpected,
    message = r.message, http_status = r.http_status, attempt_epoch = 0,
    operation_id = CASE WHEN r.op <> '' THEN r.op ELSE t.operation_id END,
    output = CASE WHEN r.output IS NOT NULL THEN r.output ELSE t.output END,
    next_attempt_at = CASE WHEN r.status <> 'pending' THEN t.next_attempt_at
        WHEN t.deadline IS NOT NULL AND r.next > t.deadline THEN t.deadline ELSE r.next END,
    completed_at = CASE WHEN r.status <> 'pending' THEN $11::timestamptz ELSE NULL END
FROM unnest($2::text[], $3::text[], $4::int[], $5::int[], $6::int[], $7::text[], $8::int[], $9::text[],
    $10::timestamptz[], $12::bytea[]) AS r(id, status, attempts, blocked, unexpected, message, http_status, op, next, output)
WHERE t.id = r.id AND t.shard = $1 AND t.status = 'pending'`,
			shard, ids, statuses, attempts, blocked, unexpected, msgs, httpStatus, ops, nexts, now, outputs)
		return err
	})
	if err == nil {
		// No notify: only the shard's owner writes its results, and its
		// queue wakes its own reader after each write; waking every reader
		// of the node here made each of them query again per write.
		s.pending.drop()
	}
	return err
}

var _ queue.Store = (*Store)(nil)
