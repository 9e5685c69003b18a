package pgstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"fusebox/internal/pgtest"
	"fusebox/queue"
	"fusebox/raftstore/state"
)

// The request-id lookups probe the unique index per pair even on a task
// table never analyzed (the state after a start or a bulk import, until
// autovacuum catches up): never a hash join over a scan of every task.
func TestRequestLookupsProbeTheIndex(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	seedTasks(t, s.pool, 1, 60000, "g % 16", "CASE WHEN g % 2 = 0 THEN 'succeeded' ELSE 'pending' END", 0)
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
	seedTasks(t, s.pool, 1, 60000, "g % 16", "'pending'", 400)
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

// A node's connections live for hours, and PostgreSQL keeps a prepared
// statement's generic plan for the connection's life, rebuilt only when the
// table is analyzed again. A generic plan made while the task table was
// small reads it whole: once the table has grown (a backlog, or simply the
// first minutes of a new cluster, before autovacuum's next ANALYZE), every
// result write scanned every task of every shard. Measured: 39 ms per
// write of 128 results at 40,000 tasks against 6 ms (the benchmark of 1, 3
// and 5 processes, whose one-process side paid it in every turn). A result
// write is now planned for its results and the table as it is (plans.go).
func TestResultWritePlansFollowTheTableAsItGrows(t *testing.T) {
	s, err := Open(t.Context(), Config{URL: pgtest.NewDatabase(t), PollInterval: 50 * time.Millisecond, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := t.Context()
	// No ANALYZE behind the test's back: it would replace a cached plan.
	if _, err := s.pool.Exec(ctx, `ALTER TABLE fusebox_tasks SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Acquire(ctx, 3, "n1", 1); err != nil {
		t.Fatal(err)
	}
	done := func(from, n int) []queue.Result {
		res := make([]queue.Result, n)
		for i := range res {
			res[i] = queue.Result{TaskID: fmt.Sprintf("%032d", from+i), Status: state.TaskSucceeded, Attempts: 1, HTTPStatus: 200}
		}
		return res
	}
	// While the table is small, enough writes that PostgreSQL would settle
	// on a generic plan (it tries one after five custom plans).
	seedTasks(t, s.pool, 1, 40, "3", "'pending'", 200)
	for i := range 10 {
		if err := s.Complete(ctx, 3, 1, done(1+2*i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	seedTasks(t, s.pool, 1000, 40000, "3", "'pending'", 200)
	before := seqScans(t, s)
	if err := s.Complete(ctx, 3, 1, done(1000, 128)); err != nil {
		t.Fatal(err)
	}
	if after := seqScans(t, s); after != before {
		t.Fatalf("a result write of 128 results read the whole task table (%d sequential scans), on a plan made when it held 40 tasks", after-before)
	}
	wantStatus(t, s, fmt.Sprintf("%032d", 1127), state.TaskSucceeded)
}

// seqScans is the task table's sequential scans so far. The store's one
// connection flushes its statistics first: PostgreSQL counts a backend's
// scans in the backend until it reports them, at most once a second.
func seqScans(t *testing.T, s *Store) int64 {
	t.Helper()
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'fusebox_tasks'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A URL that sets plan_cache_mode (as a parameter or in options), or a
// database set to one, keeps the operator's choice for every statement:
// result writes are not wrapped.
func TestOperatorsPlanCacheModeIsKept(t *testing.T) {
	url := pgtest.NewDatabase(t)
	for _, tc := range []struct {
		param   string
		alterDB bool // ALTER DATABASE … SET plan_cache_mode first
		want    bool
	}{
		{"", false, true},
		{"plan_cache_mode=force_generic_plan&", false, false},
		{"options=-c%20plan_cache_mode%3Dauto&", false, false},
		{"", true, false},
	} {
		if tc.alterDB {
			if err := pgtest.SharedServer(t).Exec(`ALTER DATABASE ` + dbName(t, url) + ` SET plan_cache_mode = force_generic_plan`); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(t.Context(), Config{URL: strings.Replace(url, "?", "?"+tc.param, 1), PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		got := s.customPlans.Load()
		// The write works either way.
		if err := s.Acquire(t.Context(), 5, "n1", 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(t.Context(), 5, 1, []queue.Result{{TaskID: "missing", Status: state.TaskSucceeded}}); err != nil {
			t.Fatalf("%q: %v", tc.param, err)
		}
		s.Close()
		if got != tc.want {
			t.Errorf("URL %q, database altered %v: result writes custom-planned %v, want %v", tc.param, tc.alterDB, got, tc.want)
		}
	}
}

// dbName is the database name of a pgtest URL.
func dbName(t *testing.T, url string) string {
	t.Helper()
	path := url[strings.LastIndex(url, "/")+1:]
	if i := strings.Index(path, "?"); i >= 0 {
		path = path[:i]
	}
	return path
}

// seedTasks inserts tasks from..to in one statement: ids lpad(g, 32, '0'),
// request ids rid-<g>; shard and status are SQL expressions of g, and each
// request is pad bytes ('{}' when 0). Tasks not pending get a completion
// time.
func seedTasks(tb testing.TB, pool *pgxpool.Pool, from, to int, shard, status string, pad int) {
	tb.Helper()
	if _, err := pool.Exec(tb.Context(), `INSERT INTO fusebox_tasks (id, shard, namespace_id, workflow_id, task_group, destination,
    destination_key, request_id, request, status, next_attempt_at, created_at, completed_at)
SELECT lpad(g::text, 32, '0'), `+shard+`, 'ns', 'wf' || g, 'callbacks.Invocation', 'http://x', 'http://x', 'rid-' || g,
    CASE WHEN $3::int = 0 THEN '{}'::bytea ELSE convert_to(repeat('x', $3::int), 'UTF8') END,
    st, now(), now(), CASE WHEN st <> 'pending' THEN now() END
FROM (SELECT g, `+status+` AS st FROM generate_series($1::int, $2::int) g) AS s`, from, to, pad); err != nil {
		tb.Fatal(err)
	}
}
