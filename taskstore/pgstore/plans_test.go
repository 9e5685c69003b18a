package pgstore

import (
	"fmt"
	"strings"
	"testing"

	"fusebox/queue"
	"fusebox/raftstore/state"
)

// The request-id lookups probe the unique index per pair even on a task
// table never analyzed (the state after a start or a bulk import, until
// autovacuum catches up): never a hash join over a scan of every task.
func TestRequestLookupsProbeTheIndex(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `INSERT INTO fusebox_tasks (id, shard, namespace_id, workflow_id, task_group, destination,
    destination_key, request_id, request, status, next_attempt_at, created_at)
SELECT lpad(g::text, 32, '0'), g % 16, 'ns', 'wf' || g, 'callbacks.Invocation', 'http://x', 'http://x', 'rid-' || g,
    '{}'::bytea, CASE WHEN g % 2 = 0 THEN 'succeeded' ELSE 'pending' END, now(), now()
FROM generate_series(1, 60000) g`); err != nil {
		t.Fatal(err)
	}
	nss, rids := make([]string, 500), make([]string, 500)
	for i := range nss {
		nss[i], rids[i] = "ns", fmt.Sprintf("rid-%d", i*7)
	}
	for name, q := range map[string]string{"stored": storedRequestsSQL, "duplicates": duplicateRequestsSQL} {
		if p := explain(t, s.pool, q, nss, rids); !strings.Contains(p, "fusebox_tasks_request") || strings.Contains(p, "Seq Scan on fusebox_tasks") {
			t.Errorf("%s: the plan does not probe the request index per pair:\n%s", name, p)
		}
	}
	var got int
	rows, err := s.pool.Query(ctx, storedRequestsSQL, nss, rids)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		got++
	}
	rows.Close()
	if got != 499 { // rid-0 is not stored
		t.Fatalf("stored pairs %d, want 499", got)
	}
}

// A result write probes the primary key per result even on a task table
// never analyzed, in a generic plan and a custom one: never a read of the
// shard's whole backlog through the due index, hash-joined with the results
// (what `status = 'pending'` in completeSQL gave: 31–40 ms for 80 results at
// 200,000 pending tasks).
func TestCompleteProbesThePrimaryKey(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `INSERT INTO fusebox_tasks (id, shard, namespace_id, workflow_id, task_group, destination,
    destination_key, request_id, request, status, next_attempt_at, created_at)
SELECT lpad(g::text, 32, '0'), g % 16, 'ns', 'wf' || g, 'callbacks.Invocation', 'http://x', 'http://x', 'rid-' || g,
    convert_to(repeat('x', 400), 'UTF8'), 'pending', now(), now()
FROM generate_series(1, 60000) g`); err != nil {
		t.Fatal(err)
	}
	var res []queue.Result
	for g := 3; len(res) < 80; g += 16 {
		res = append(res, queue.Result{TaskID: fmt.Sprintf("%032d", g), Status: state.TaskSucceeded, Attempts: 1, HTTPStatus: 200})
	}
	a := completeArgsOf(res)
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		p := explain(t, tx, completeSQL, a.params(3, 1)...)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p, "Index Scan using fusebox_tasks_pkey on fusebox_tasks t") ||
			strings.Contains(p, "fusebox_tasks_due") || strings.Contains(p, "Seq Scan on fusebox_tasks") {
			t.Errorf("%s: the result write does not probe the primary key per result:\n%s", mode, p)
		}
	}
}

// explain is sql's plan (EXPLAIN) with args, a line a row.
func explain(t *testing.T, q queryer, sql string, args ...any) string {
	t.Helper()
	rows, err := q.Query(t.Context(), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}
