package pgstore

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"fusebox/internal/pgtest"
	"fusebox/raftstore/state"
)

// A database at schema version 2 holding tasks of every status is
// migrated at Open: the rare-status index is built, the all-terminal one
// dropped, and the listings it served answer as before, the rare statuses
// through the new index. Down (3 → 2) restores the old index, and up again
// works.
func TestMigrationsReplaceTheStatusIndex(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	migrateTo := func(version uint) {
		t.Helper()
		m, closeMigrate, err := openMigrate(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer closeMigrate()
		if err := m.Migrate(version); err != nil {
			t.Fatal(err)
		}
	}
	migrateTo(2)
	// 60,000 tasks: 3,000 in the dead-letter queue, 20 failed, the rest
	// succeeded.
	seedTasks(t, pool, 1, 60000, "g % 16", `CASE WHEN g % 20 = 7 THEN 'dlq' WHEN g % 3000 = 11 THEN 'failed' ELSE 'succeeded' END`, 0)
	indexes := func() []string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'fusebox_tasks'::regclass AND i.indisvalid AND c.relname LIKE 'fusebox_tasks_status%' ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	if got := indexes(); !slices.Equal(got, []string{"fusebox_tasks_status_id"}) {
		t.Fatalf("at version 2: status indexes %v", got)
	}

	s, err := Open(ctx, Config{URL: url, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := indexes(); !slices.Equal(got, []string{"fusebox_tasks_status_rare"}) {
		t.Fatalf("after Open: status indexes %v, want only fusebox_tasks_status_rare", got)
	}
	for _, tc := range []struct {
		status string
		want   int
	}{{state.TaskDLQ, 500}, {state.TaskFailed, 20}, {state.TaskSucceeded, 500}} {
		page, _, err := s.ListTasksPage(ctx, state.TaskQuery{Status: tc.status, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != tc.want || !slices.IsSortedFunc(page, func(a, b state.Task) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatalf("%s: %d tasks (sorted: %v), want %d in id order", tc.status, len(page), slices.IsSortedFunc(page, func(a, b state.Task) int { return strings.Compare(a.ID, b.ID) }), tc.want)
		}
		for _, tk := range page {
			if tk.Status != tc.status {
				t.Fatalf("%s listing holds %s task %s", tc.status, tk.Status, tk.ID)
			}
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE fusebox_tasks`); err != nil {
		t.Fatal(err)
	}
	// A page of a large dead-letter queue is read in id order from the
	// rare-status index (not all 3,000 sorted for each page); a small
	// status through some index on status, never a walk of every task.
	list := func(status string) string {
		t.Helper()
		sql, args := listSQL(state.TaskQuery{Status: status, Limit: 100})
		return explain(t, pool, sql, args...)
	}
	for _, p := range []string{list(state.TaskDLQ), explain(t, pool, `SELECT id FROM fusebox_tasks WHERE status = 'dlq' ORDER BY id LIMIT $1`, state.MaxRedriveBatch+1)} {
		if !strings.Contains(p, "fusebox_tasks_status_rare") {
			t.Errorf("a dead-letter page does not read the rare-status index:\n%s", p)
		}
	}
	if p := list(state.TaskFailed); strings.Contains(p, "Seq Scan") || strings.Contains(p, "fusebox_tasks_pkey") {
		t.Errorf("listing failed tasks walks every task:\n%s", p)
	}
	s.Close()

	migrateTo(2)
	if got := indexes(); !slices.Equal(got, []string{"fusebox_tasks_status_id"}) {
		t.Fatalf("down to version 2: status indexes %v", got)
	}
	migrateTo(SchemaVersion)
	if got := indexes(); !slices.Equal(got, []string{"fusebox_tasks_status_rare"}) {
		t.Fatalf("up again: status indexes %v", got)
	}
}

// Every node of a cluster opens the store at once on a new database (a
// cluster's first start, or a rolling upgrade's), so they meet at the
// migration lock: one migrates while the others wait, then all run, and
// all close (every connection back in its pool).
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	url := pgtest.NewDatabase(t)
	const nodes = 3
	stores := make([]*Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			stores[i], errs[i] = Open(t.Context(), Config{URL: url, PollInterval: time.Hour})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for _, s := range stores {
			s.Close()
		}
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("closing the stores did not return within 30 s: a connection was not given back")
	}
}
