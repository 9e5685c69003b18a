package pgstore

import (
	"context"
	"time"

	"fusebox/raftstore/state"
	"fusebox/tasks"
	"github.com/jackc/pgx/v5"
)

// Imported is one pending task moved from another cluster (`fusebox admin
// tasks import`): a submit's task with its own id and deadline, plus the
// attempts it has made, when it is next due and when it was created.
type Imported = tasks.Imported

// Import inserts tasks as pending with their ids, attempts, next attempt,
// creation time and deadline, in one statement. It is idempotent: a task
// whose id, or whose (namespace, request id), is already stored is not
// inserted, and its outcome is a duplicate naming the stored task (so an
// import run twice adds nothing, even after the first run's tasks were
// delivered, within the retention period). Backlog limits do not apply.
// The returned error means nothing is known committed.
func (s *Store) Import(ctx context.Context, tasks []Imported) ([]state.SubmitOutcome, error) {
	inserted := make(map[string]bool, len(tasks))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		clear(inserted)
		return insertImported(ctx, tx, tasks, inserted)
	})
	if err != nil {
		return nil, err
	}
	out := make([]state.SubmitOutcome, len(tasks))
	var dup []int
	for i, t := range tasks {
		if inserted[t.ID] {
			out[i] = state.SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: state.SubmitAccepted}
			delete(inserted, t.ID) // the same id twice in one import: the second is its duplicate
			continue
		}
		dup = append(dup, i)
	}
	s.pending.add(len(tasks) - len(dup))
	if len(dup) > 0 {
		if err := s.importDuplicates(ctx, tasks, dup, out); err != nil {
			return nil, err
		}
	}
	s.wroteLows(nil) // every shard read whole: imports are rare
	return out, nil
}

func insertImported(ctx context.Context, tx pgx.Tx, tasks []Imported, inserted map[string]bool) error {
	n := len(tasks)
	ids, nss, wfs, groups, dests, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	shards, attempts := make([]int32, n), make([]int32, n)
	reqIDs := make([]*string, n)
	reqs := make([][]byte, n)
	nexts, created := make([]time.Time, n), make([]time.Time, n)
	deadlines := make([]*time.Time, n)
	s2c := make([]int64, n)
	for i, t := range tasks {
		ids[i], nss[i], wfs[i], groups[i], dests[i], keys[i] = t.ID, t.NamespaceID, t.WorkflowID, t.TaskGroup, t.Destination, t.DestinationKey
		shards[i], attempts[i] = int32(t.Shard), int32(t.Attempts)
		if t.RequestID != "" {
			r := t.RequestID
			reqIDs[i] = &r
		}
		reqs[i] = t.Request
		nexts[i], created[i] = micro(t.NextAttemptAt), micro(t.CreatedAt)
		if !t.Deadline.IsZero() {
			d := micro(t.Deadline)
			// The timeout it was fixed with, which a redrive starts again.
			deadlines[i], s2c[i] = &d, max(int64(d.Sub(created[i])), 0)
		}
	}
	rows, err := tx.Query(ctx, `
INSERT INTO fusebox_tasks (id, shard, namespace_id, workflow_id, task_group, destination, destination_key,
    request_id, request, status, attempts, next_attempt_at, created_at, deadline, schedule_to_close_ns)
SELECT r.id, r.shard, r.ns, r.wf, r.tg, r.dest, r.dkey, r.rid, r.req, 'pending', r.attempts, r.next, r.created,
    r.deadline, r.s2c
FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
    $9::bytea[], $10::int[], $11::timestamptz[], $12::timestamptz[], $13::timestamptz[], $14::bigint[])
    AS r(id, shard, ns, wf, tg, dest, dkey, rid, req, attempts, next, created, deadline, s2c)
ON CONFLICT DO NOTHING
RETURNING id`, ids, shards, nss, wfs, groups, dests, keys, reqIDs, reqs, attempts, nexts, created, deadlines, s2c)
	if err != nil {
		return err
	}
	ins, err := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, id := range ins {
		inserted[id] = true
	}
	return err
}

// importDuplicates names, for each task not inserted, the stored task that
// kept it out: the one with its id, else the one with its (namespace,
// request id).
func (s *Store) importDuplicates(ctx context.Context, tasks []Imported, dup []int, out []state.SubmitOutcome) error {
	ids, nss, rids := make([]string, len(dup)), make([]string, len(dup)), make([]string, len(dup))
	idx := make([]int32, len(dup))
	for j, i := range dup {
		ids[j], nss[j], rids[j], idx[j] = tasks[i].ID, tasks[i].NamespaceID, tasks[i].RequestID, int32(i)
	}
	rows, err := s.pool.Query(ctx, `
SELECT d.i, t.id, t.shard, t.id = d.id FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS d(id, ns, rid, i)
JOIN fusebox_tasks t ON t.id = d.id OR (d.rid <> '' AND t.namespace_id = d.ns AND t.request_id = d.rid)`, ids, nss, rids, idx)
	if err != nil {
		return err
	}
	byID := map[int]bool{}
	for rows.Next() {
		var i, shard int32
		var id string
		var sameID bool
		if err := rows.Scan(&i, &id, &shard, &sameID); err != nil {
			rows.Close()
			return err
		}
		if byID[int(i)] {
			continue // the task with the same id wins over a request id match
		}
		out[i] = state.SubmitOutcome{TaskID: id, Shard: int(shard), Outcome: state.SubmitDuplicate}
		byID[int(i)] = sameID
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range dup {
		if out[i].Outcome == "" { // stored a moment ago and collected since: still not added
			out[i] = state.SubmitOutcome{TaskID: tasks[i].ID, Shard: tasks[i].Shard, Outcome: state.SubmitDuplicate}
		}
	}
	return nil
}
