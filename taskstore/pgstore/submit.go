package pgstore

import (
	"context"
	"fmt"
	"time"

	"fusebox/raftstore/state"
)

// Submit inserts tasks as pending, due at `at`, in one statement (arrays
// unnested server-side). A task whose (namespace, request id) is already
// stored is not inserted: its outcome is a duplicate carrying the stored
// task's id and shard (the unique index decides, also across nodes). A task
// over one of the limits it carries (NewTask.MaxDestinationBacklog,
// MaxPendingTasks) is not inserted: its outcome is overloaded with the
// raft store's reason (limits.go). The returned error means nothing is
// known committed: no outcome is accepted before the statement commits.
//
// Concurrent calls are committed together (group.go): the calls that
// arrive while a transaction is in flight share the next one, in arrival
// order, as the raft store puts concurrent submits in one log entry.
func (s *Store) Submit(ctx context.Context, tasks []state.NewTask, at time.Time) ([]state.SubmitOutcome, error) {
	return s.group.submit(ctx, s, tasks, at)
}

// submitNow writes tasks, task i due at ats[i]: the limits' reads (one
// pipelined round trip, none when no task carries a limit), then one INSERT
// that is its own transaction. No BEGIN and COMMIT round trips: at the
// database's default isolation (READ COMMITTED) every statement of a
// transaction reads what was committed when it started, so the reads
// decided nothing more inside one than before it; what keeps a request id
// from being stored twice is the unique index the INSERT meets, and the
// limits are not serialised across nodes either way (DESIGN.md). The
// INSERT's commit is checked: pgx reads to the end of the statement's
// answer, where a failed commit reports its error.
func (s *Store) submitNow(ctx context.Context, tasks []state.NewTask, ats []time.Time) ([]state.SubmitOutcome, error) {
	n := len(tasks)
	inserted := make(map[string]bool, n)
	var refused map[int]string
	err := s.retry(ctx, func() error {
		clear(inserted)
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		if refused, err = s.overloaded(ctx, conn, tasks); err != nil {
			return err
		}
		return insertTasks(ctx, conn, tasks, refused, ats, inserted)
	})
	if err != nil {
		return nil, err
	}
	out := make([]state.SubmitOutcome, n)
	var dupNS, dupRID []string
	accepted := 0
	for i, t := range tasks {
		switch {
		case inserted[t.ID]:
			out[i] = state.SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: state.SubmitAccepted}
			accepted++
		case refused[i] != "":
			out[i] = state.SubmitOutcome{TaskID: t.ID, Shard: t.Shard, Outcome: state.SubmitOverloaded, Reason: refused[i]}
		default:
			dupNS, dupRID = append(dupNS, t.NamespaceID), append(dupRID, t.RequestID)
		}
	}
	s.pending.add(accepted)
	if len(dupNS) > 0 {
		if afterInsertHook != nil {
			afterInsertHook()
		}
		if err := s.readAfterCommit(ctx, func() error {
			return s.duplicates(ctx, tasks, inserted, refused, dupNS, dupRID, out)
		}); err != nil {
			return nil, err
		}
		if err := s.insertVanished(ctx, tasks, ats, out); err != nil {
			return nil, err
		}
	}
	if accepted > 0 {
		lows := make(map[int]time.Time)
		for i, t := range tasks {
			if !inserted[t.ID] {
				continue
			}
			at := micro(ats[i]) // as stored
			if cur, ok := lows[t.Shard]; !ok || at.Before(cur) {
				lows[t.Shard] = at
			}
		}
		s.wroteLows(lows)
	}
	return out, nil
}

// readAfterCommit runs read, a read that follows a committed INSERT, again
// on any error while ctx lasts (five tries, 50 ms to 800 ms apart). Its
// error reports the whole submit as not committed, though tasks of it are,
// and a client's retry then stores again every task with neither a
// request id nor an X-Request-Id (request_key.go): a dropped connection or
// a failover in between is worth waiting out.
func (s *Store) readAfterCommit(ctx context.Context, read func() error) error {
	var err error
	for attempt := range 5 {
		if err = read(); err == nil || ctx.Err() != nil {
			return err
		}
		s.log.Warn("reading duplicates after a committed submit failed; retrying", "attempt", attempt+1, "err", err)
		select {
		case <-time.After(50 * time.Millisecond << attempt):
		case <-ctx.Done():
			return err
		}
	}
	return err
}

// afterInsertHook, set by tests only, runs between the INSERT and the read
// of the stored duplicates (where retention can delete one).
var afterInsertHook func()

// insertVanished submits again the tasks whose INSERT a stored (namespace,
// request id) kept out but whose stored task was gone when duplicates read
// it (retention deleted it in between): their outcome was empty, answered
// 202 with no task id, and nothing was stored. A few rounds; past them the
// submit fails (a retry of it is safe: every task of it that was stored is
// a duplicate then).
func (s *Store) insertVanished(ctx context.Context, tasks []state.NewTask, ats []time.Time, out []state.SubmitOutcome) error {
	for range 3 {
		var again []int
		for i := range out {
			if out[i].Outcome == "" {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return nil
		}
		sub, subAts := make([]state.NewTask, len(again)), make([]time.Time, len(again))
		for j, i := range again {
			sub[j], subAts[j] = tasks[i], ats[i]
		}
		res, err := s.submitNow(ctx, sub, subAts)
		if err != nil {
			return err
		}
		for j, i := range again {
			out[i] = res[j]
		}
	}
	for i := range out {
		if out[i].Outcome == "" {
			return fmt.Errorf("pgstore: submit: the stored task of request id %q (namespace %q) was deleted while this submit read it, three times; retry", tasks[i].RequestID, tasks[i].NamespaceID)
		}
	}
	return nil
}

// insertTasks inserts the tasks not refused and records the ids inserted.
func insertTasks(ctx context.Context, tx queryer, tasks []state.NewTask, refused map[int]string, ats []time.Time, inserted map[string]bool) error {
	n := len(tasks)
	ids, groups, nss, wfs, dests, keys := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	shards := make([]int32, 0, n)
	reqIDs := make([]*string, 0, n)
	reqs := make([][]byte, 0, n)
	deadlines := make([]*time.Time, 0, n)
	s2c := make([]int64, 0, n)
	dues := make([]time.Time, 0, n)
	for i, t := range tasks {
		if refused[i] != "" {
			continue
		}
		ids, shards, nss, wfs, groups, dests, keys = append(ids, t.ID), append(shards, int32(t.Shard)), append(nss, t.NamespaceID),
			append(wfs, t.WorkflowID), append(groups, t.TaskGroup), append(dests, t.Destination), append(keys, t.DestinationKey)
		var rid *string
		if t.RequestID != "" {
			r := t.RequestID
			rid = &r
		}
		reqIDs, reqs = append(reqIDs, rid), append(reqs, t.Request)
		at := micro(ats[i])
		dues = append(dues, at)
		var dl *time.Time
		var d2c int64
		if !t.Deadline.IsZero() {
			d := micro(t.Deadline)
			dl, d2c = &d, int64(d.Sub(at))
		}
		deadlines, s2c = append(deadlines, dl), append(s2c, d2c)
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `
INSERT INTO fusebox_tasks (id, shard, namespace_id, workflow_id, task_group, destination, destination_key,
    request_id, request, status, next_attempt_at, created_at, deadline, schedule_to_close_ns)
SELECT r.id, r.shard, r.ns, r.wf, r.tg, r.dest, r.dkey, r.rid, r.req, 'pending', r.due, r.due, r.deadline, r.s2c
FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
    $9::bytea[], $10::timestamptz[], $11::bigint[], $12::timestamptz[])
    AS r(id, shard, ns, wf, tg, dest, dkey, rid, req, deadline, s2c, due)
ON CONFLICT (namespace_id, request_id) DO NOTHING
RETURNING id`, ids, shards, nss, wfs, groups, dests, keys, reqIDs, reqs, deadlines, s2c, dues)
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
}

// duplicates fills the outcomes of the tasks a stored (namespace, request
// id) kept out with the stored task's id and shard.
func (s *Store) duplicates(ctx context.Context, tasks []state.NewTask, inserted map[string]bool, refused map[int]string,
	dupNS, dupRID []string, out []state.SubmitOutcome) error {
	orig := make(map[[2]string]state.SubmitOutcome, len(dupNS))
	rows, err := s.pool.Query(ctx, duplicateRequestsSQL, dupNS, dupRID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var ns, rid, id string
		var shard int32
		if err := rows.Scan(&ns, &rid, &id, &shard); err != nil {
			rows.Close()
			return err
		}
		orig[[2]string{ns, rid}] = state.SubmitOutcome{TaskID: id, Shard: int(shard), Outcome: state.SubmitDuplicate}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, t := range tasks {
		if !inserted[t.ID] && refused[i] == "" {
			out[i] = orig[[2]string{t.NamespaceID, t.RequestID}]
		}
	}
	return nil
}
