package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"fusebox/raftstore"
)

// Submit inserts tasks as pending, due at `at`, in one statement (arrays
// unnested server-side). A task whose (namespace, request id) is already
// stored is not inserted: its outcome is a duplicate carrying the stored
// task's id and shard (the unique index decides, also across nodes). The
// returned error means nothing is known committed: no outcome is accepted
// before the statement commits.
func (s *Store) Submit(ctx context.Context, tasks []raftstore.NewTask, at time.Time) ([]raftstore.SubmitOutcome, error) {
	at = micro(at)
	n := len(tasks)
	ids, groups, nss, wfs, dests, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	shards := make([]int32, n)
	reqIDs := make([]*string, n)
	reqs := make([][]byte, n)
	deadlines := make([]*time.Time, n)
	s2c := make([]int64, n)
	for i, t := range tasks {
		ids[i], shards[i], nss[i], wfs[i], groups[i], dests[i], keys[i] = t.ID, int32(t.Shard), t.NamespaceID, t.WorkflowID, t.TaskGroup, t.Destination, t.DestinationKey
		if t.RequestID != "" {
			r := t.RequestID
			reqIDs[i] = &r
		}
		reqs[i] = t.Request
		if !t.Deadline.IsZero() {
			d := micro(t.Deadline)
			deadlines[i] = &d
			s2c[i] = int64(t.Deadline.Sub(at))
		}
	}
	inserted := make(map[string]bool, n)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		clear(inserted)
		rows, err := tx.Query(ctx, `
INSERT INTO fusebox_tasks (id, shard, namespace_id, workflow_id, task_group, destination, destination_key,
    request_id, request, status, next_attempt_at, created_at, deadline, schedule_to_close_ns)
SELECT r.id, r.shard, r.ns, r.wf, r.tg, r.dest, r.dkey, r.rid, r.req, 'pending', $12, $12, r.deadline, r.s2c
FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
    $9::bytea[], $10::timestamptz[], $11::bigint[])
    AS r(id, shard, ns, wf, tg, dest, dkey, rid, req, deadline, s2c)
ON CONFLICT (namespace_id, request_id) DO NOTHING
RETURNING id`, ids, shards, nss, wfs, groups, dests, keys, reqIDs, reqs, deadlines, s2c, at)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			inserted[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]raftstore.SubmitOutcome, n)
	var dupNS, dupRID []string
	for i, t := range tasks {
		if inserted[t.ID] {
			out[i] = raftstore.SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: raftstore.SubmitAccepted}
			continue
		}
		dupNS, dupRID = append(dupNS, t.NamespaceID), append(dupRID, t.RequestID)
	}
	if len(dupNS) > 0 {
		orig := make(map[[2]string]raftstore.SubmitOutcome, len(dupNS))
		rows, err := s.pool.Query(ctx, `
SELECT t.namespace_id, t.request_id, t.id, t.shard FROM fusebox_tasks t
JOIN unnest($1::text[], $2::text[]) AS d(ns, rid) ON t.namespace_id = d.ns AND t.request_id = d.rid`, dupNS, dupRID)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var ns, rid, id string
			var shard int32
			if err := rows.Scan(&ns, &rid, &id, &shard); err != nil {
				rows.Close()
				return nil, err
			}
			orig[[2]string{ns, rid}] = raftstore.SubmitOutcome{TaskID: id, Shard: int(shard), Outcome: raftstore.SubmitDuplicate}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for i, t := range tasks {
			if !inserted[t.ID] {
				out[i] = orig[[2]string{t.NamespaceID, t.RequestID}]
			}
		}
	}
	s.notify()
	return out, nil
}
