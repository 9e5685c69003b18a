package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Statement statistics for benchmarks (issue 18's "queries per task"): with
// FUSEBOX_PGTEST_STATS=1 in the environment every server this package
// starts loads pg_stat_statements, a benchmark calls ResetStatements
// before its measured part and StatementsReport after it, and logs the
// report. Without it both do nothing, so benchmarks call them always.

// StatsEnabled reports whether FUSEBOX_PGTEST_STATS asks for statement
// statistics.
func StatsEnabled() bool { return os.Getenv("FUSEBOX_PGTEST_STATS") != "" }

// ResetStatements creates pg_stat_statements in the server's "postgres"
// database if needed and clears its counts (every database's).
func (s *Server) ResetStatements(ctx context.Context) error {
	if !StatsEnabled() {
		return nil
	}
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_reset_shared('wal')`); err != nil {
		return err
	}
	var xid int64
	if err := conn.QueryRow(ctx, xidNext).Scan(&xid); err != nil {
		return err
	}
	s.xidAtReset.Store(xid)
	var lsn int64
	if err := conn.QueryRow(ctx, walLSN).Scan(&lsn); err != nil {
		return err
	}
	s.lsnAtReset.Store(lsn)
	return nil
}

// walLSN reads the server's WAL insert position in bytes: the difference
// of two readings is the WAL written between them, exactly (pg_stat_wal's
// counters are reported by each backend at intervals, so a short turn's
// can miss a backend's last second).
const walLSN = `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`

// xidNext reads the next transaction id to be assigned: only a
// transaction that writes (or notifies) takes one, so the ids assigned
// count the write transactions, read-only ones left out.
const xidNext = `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`

// StatementsReport is the top statements since ResetStatements, by total
// time: calls, calls per task (tasks: what the benchmark did), rows, total
// and mean time, and the statement's first 90 characters. "" when
// statistics are off.
func (s *Server) StatementsReport(ctx context.Context, tasks int) (string, error) {
	if !StatsEnabled() {
		return "", nil
	}
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT calls, rows, total_exec_time, mean_exec_time, total_plan_time, query
FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC LIMIT 25`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	var allCalls int64
	var allMs, allPlanMs float64
	fmt.Fprintf(&b, "%10s %9s %10s %10s %8s %8s  %s\n", "calls", "per-task", "rows", "total-ms", "mean-ms", "plan-ms", "query")
	for rows.Next() {
		var calls, nrows int64
		var total, mean, plan float64
		var q string
		if err := rows.Scan(&calls, &nrows, &total, &mean, &plan, &q); err != nil {
			return "", err
		}
		allCalls += calls
		allMs += total
		allPlanMs += plan
		q = strings.Join(strings.Fields(q), " ")
		if len(q) > 90 {
			q = q[:90]
		}
		fmt.Fprintf(&b, "%10d %9.3f %10d %10.1f %8.3f %8.1f  %s\n", calls, float64(calls)/float64(max(tasks, 1)), nrows, total, mean, plan, q)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "top statements: %d calls (%.3f per task), %.0f ms executing, %.0f ms planning (0 unless -c pg_stat_statements.track_planning=on)\n",
		allCalls, float64(allCalls)/float64(max(tasks, 1)), allMs, allPlanMs)
	// WAL flushes: with synchronous_commit on, a commit that wrote waits
	// for one (concurrent commits share one).
	var records, fpi, syncs, lsn int64
	var syncMs float64
	if err := conn.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_sync, wal_sync_time FROM pg_stat_wal`).Scan(&records, &fpi, &syncs, &syncMs); err != nil {
		return "", err
	}
	if err := conn.QueryRow(ctx, walLSN).Scan(&lsn); err != nil {
		return "", err
	}
	wal := lsn - s.lsnAtReset.Load()
	fmt.Fprintf(&b, "WAL: %d bytes (%.0f per task), %d records and %d full-page images reported, %d flushes (%.3f per task), %.0f ms flushing\n",
		wal, float64(wal)/float64(max(tasks, 1)), records, fpi, syncs, float64(syncs)/float64(max(tasks, 1)), syncMs)
	var xid int64
	if err := conn.QueryRow(ctx, xidNext).Scan(&xid); err != nil {
		return "", err
	}
	n := xid - s.xidAtReset.Load()
	fmt.Fprintf(&b, "write transactions: %d (%.3f per task)\n", n, float64(n)/float64(max(tasks, 1)))
	return b.String(), nil
}
