package pgstore

import (
	"context"
	"errors"
	"fmt"
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

// Fences reads the database's fence of every shard that has one: the
// owner and epoch of its last Acquire. Within one cluster's history no fence
// is ahead of the committed shard map (a node acquires only epochs of
// committed maps); one that is belongs to another history — a cluster
// rebuilt on this database, or another cluster sharing it — and would
// refuse every acquire of this cluster's owners. The Raft leader raises
// such shards' epochs past it (ownership, "Fences of the task store").
func (s *Store) Fences(ctx context.Context) (map[int]shardmap.Assignment, error) {
	out := map[int]shardmap.Assignment{}
	err := s.retry(ctx, func() error {
		clear(out)
		rows, err := s.pool.Query(ctx, `SELECT shard, epoch, owner FROM fusebox_shards`)
		if err != nil {
			return err
		}
		var (
			shard int32
			epoch int64
			owner string
		)
		_, err = pgx.ForEachRow(rows, []any{&shard, &epoch, &owner}, func() error {
			if epoch < 0 {
				return fmt.Errorf("fusebox_shards: shard %d has a negative epoch %d", shard, epoch)
			}
			out[int(shard)] = shardmap.Assignment{Shard: int(shard), Owner: owner, Epoch: uint64(epoch)}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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

// Complete implements queue.Store. A shard's write is one statement, so one
// round trip: its first part locks the shard's row at epoch (an UPDATE
// that matches only the current epoch: a new owner's Acquire either
// committed before, and nothing matches, or waits for this write's
// commit); the task rows are written — results and start markers, one
// UPDATE over unnest'ed arrays — only if that matched (a one-time filter
// on the fence, evaluated before any task row is touched). A stale epoch
// refuses the whole batch with a *shardmap.WrongOwnerError carrying the
// database's owner and epoch; the queue then drops the shard. Results for
// unknown, other-shard or terminal tasks are ignored.
//
// Concurrent calls (the queue flushes each shard on its own) are committed
// together: complete_group.go.
func (s *Store) Complete(ctx context.Context, shard int, epoch uint64, results []queue.Result) error {
	if len(results) == 0 {
		return nil
	}
	return s.completes.complete(ctx, s, &completeCall{shard: shard, epoch: epoch, args: completeArgsOf(results)})
}

// completeArgs are completeSQL's arrays ($3–$11, $13, $14) and its time ($12).
type completeArgs struct {
	now                                  time.Time
	ids, statuses, msgs, ops             []string
	attempts, blocked, unexpected, https []int32
	nexts                                []time.Time
	marks                                []bool
	outputs                              [][]byte
	bytes                                int // about what the arrays weigh on the wire
}

// completeArgsOf builds the statement's arrays from one call's results.
func completeArgsOf(results []queue.Result) completeArgs {
	now := micro(time.Now())
	last := make(map[string]int, len(results))
	for i, r := range results {
		if !r.Started {
			last[r.TaskID] = i // a later result of the same task wins, as in log order
		}
	}
	n := len(results)
	a := completeArgs{now: now,
		ids: make([]string, 0, n), statuses: make([]string, 0, n), msgs: make([]string, 0, n), ops: make([]string, 0, n),
		attempts: make([]int32, 0, n), blocked: make([]int32, 0, n), unexpected: make([]int32, 0, n), https: make([]int32, 0, n),
		nexts: make([]time.Time, 0, n), marks: make([]bool, 0, n), outputs: make([][]byte, 0, n)}
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
			a.add(r.TaskID, "", "", "", 0, 0, 0, 0, now, true, nil)
			continue
		}
		if last[r.TaskID] != i {
			continue
		}
		next := r.NextAttemptAt
		if next.IsZero() {
			next = now
		}
		a.add(r.TaskID, r.Status, r.Message, r.OperationID, int32(r.Attempts), int32(r.Blocked), int32(r.Unexpected),
			int32(r.HTTPStatus), micro(next), false, r.Output)
	}
	return a
}

func (a *completeArgs) add(id, status, msg, op string, attempts, blocked, unexpected, http int32, next time.Time, mark bool, output []byte) {
	a.ids, a.statuses, a.msgs, a.ops = append(a.ids, id), append(a.statuses, status), append(a.msgs, msg), append(a.ops, op)
	a.attempts, a.blocked, a.unexpected, a.https = append(a.attempts, attempts), append(a.blocked, blocked), append(a.unexpected, unexpected), append(a.https, http)
	a.nexts, a.marks, a.outputs = append(a.nexts, next), append(a.marks, mark), append(a.outputs, output)
	a.bytes += 48 + len(id) + len(status) + len(msg) + len(op) + len(output)
}

// completeParams are completeSQL's parameters for shard at epoch.
func (a *completeArgs) params(shard int, epoch uint64) []any {
	return []any{shard, int64(epoch), a.ids, a.statuses, a.attempts, a.blocked, a.unexpected,
		a.msgs, a.https, a.ops, a.nexts, a.now, a.outputs, a.marks}
}

// completeSQL is Complete's statement. A row of the arrays is a result, or
// a start marker (mark: the attempt's epoch is recorded, nothing else
// changes). It returns whether the fence matched and how many tasks ended
// (left pending). One UPDATE of the task table, not two: CockroachDB refuses a
// statement that modifies a table twice.
//
// The pending test also admits the empty string, which is never a status, so
// that it does not imply the partial indexes' predicate (status = 'pending').
// With `status = 'pending'` the planner could read the shard's pending tasks
// through the due index and hash-join them with the results, and on a table
// not yet analyzed (every table's first minute, before autovacuum's first
// ANALYZE) it did: every flush read its shard's whole backlog, 31–40 ms for
// 80 results at 200,000 pending tasks against 1.1–1.7 ms. Now each result
// probes the primary key, whatever the statistics
// (TestCompleteProbesThePrimaryKey).
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
    WHERE t.id = r.id AND t.shard = $1 AND t.status IN ('pending', '') AND EXISTS (SELECT 1 FROM fence)
    RETURNING NOT r.mark AND r.status <> 'pending' AS ended
)
SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM written WHERE ended)`

var _ queue.Store = (*Store)(nil)
