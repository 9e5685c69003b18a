package pgstore

import (
	"fmt"
	"strings"
	"testing"
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
		rows, err := s.pool.Query(ctx, "EXPLAIN "+q, nss, rids)
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		rows.Close()
		if p := plan.String(); !strings.Contains(p, "fusebox_tasks_request") || strings.Contains(p, "Seq Scan on fusebox_tasks") {
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
