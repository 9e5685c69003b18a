package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Custom plans for result writes.
//
// pgx prepares each statement once per connection, and after five
// executions PostgreSQL may settle on a generic plan, which it keeps for the
// connection's life and rebuilds only when the table is analyzed again. A
// generic plan of completeSQL made while the task table was small reads the
// table whole and joins it with the results: once the table has grown (a
// backlog, or a new database's first minutes, before autovacuum's first
// ANALYZE), every result write scanned every task of every shard. On the
// benchmark of 1, 3 and 5 processes (docs/benchmarks.md, "Twenty-fourth
// session") the one-process side's writes took 39 ms each against 6 ms, in
// every turn for two minutes, and the database spent 230–300 µs per task
// against 60–75.
//
// So a result write is planned for its own results and the table as it is
// (plan_cache_mode = force_custom_plan for its transaction only). It is the
// statement whose small-table plan costs the most once the table has grown:
// a scan of every task joined with every result, per write. The reads'
// small-table plans scan the table once per call at worst, and in the slow
// runs above they kept their usual cost (the shard's pending count 2.6 ms
// against 1.0, the due reads no slower); the submit's INSERT has no plan to
// choose. Planning costs about 170 µs of database CPU per write:
// BenchmarkResultWritePlans, which writes about 31 results at a time,
// measures 5–6 µs per task over generic plans (1.17–1.21×); a node writes
// 80–250 results at a time under load, so about 1–2 µs per task. Every
// statement custom (the whole connection in that mode) cost 7 µs per task
// in the same benchmark's first form.

const (
	setCustomPlans   = `SET plan_cache_mode = force_custom_plan`
	resetCustomPlans = `RESET plan_cache_mode`
)

// probeCustomPlans finds whether the database has plan_cache_mode
// (PostgreSQL 12 and later) at its default, auto, and the URL leaves it to
// the store (Init); only then are result writes wrapped in setCustomPlans.
func (s *Store) probeCustomPlans(ctx context.Context) {
	if setsPlanCacheMode(s.pool.Config().ConnConfig.RuntimeParams) {
		return // the operator's choice, for every statement
	}
	var mode *string
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('plan_cache_mode', true)`).Scan(&mode); err != nil || mode == nil {
		s.log.Info("the database has no plan_cache_mode: result writes use its own plan caching", "err", err)
		return
	}
	if *mode != "auto" {
		// Set for the server, the database or the role: also the
		// operator's choice.
		s.log.Info("plan_cache_mode is set on the database: result writes keep it", "plan_cache_mode", *mode)
		return
	}
	s.customPlans.Store(true)
}

// setsPlanCacheMode reports whether a connection's start-up parameters (the
// URL's) set plan_cache_mode: as a parameter of its own, or in options.
func setsPlanCacheMode(params map[string]string) bool {
	_, ok := params["plan_cache_mode"]
	return ok || strings.Contains(params["options"], "plan_cache_mode")
}

// queueCustomPlans queues fn's statements in b between setCustomPlans and
// resetCustomPlans when the store uses them. The batch is one implicit
// transaction: a SET in a transaction that aborts is undone with it, so the
// connection goes back to the pool as it came on either outcome.
func (s *Store) queueCustomPlans(b *pgx.Batch, fn func()) (wrapped bool) {
	wrapped = s.customPlans.Load()
	if wrapped {
		b.Queue(setCustomPlans)
	}
	fn()
	if wrapped {
		b.Queue(resetCustomPlans)
	}
	return wrapped
}
