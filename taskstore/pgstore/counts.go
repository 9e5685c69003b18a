package pgstore

import (
	"cmp"
	"context"
	"slices"

	"fusebox/raftstore/state"
)

// DestinationCounts is the status page's tasks per destination (GET
// /v1/tasks/_counts), with the raft store's meaning: pending, blocked
// (pending and refused by an open breaker) and DLQ per (namespace, breaker
// destination), busiest first. The walk reads at most maxScan pending or
// dead-lettered rows (by the status index), so a huge backlog costs one
// bounded scan; partial is true when it stopped there, and every count is
// then a lower bound (the raft store's Pending stays exact, from its
// counters: the database has none to read).
func (s *Store) DestinationCounts(ctx context.Context, maxScan int) ([]state.DestinationCount, bool, error) {
	if maxScan <= 0 {
		return nil, false, nil
	}
	rows, err := s.pool.Query(ctx, `
SELECT namespace_id, dest,
       sum(CASE WHEN status = 'pending' THEN 1 ELSE 0 END),
       sum(CASE WHEN status = 'pending' AND blocked > 0 THEN 1 ELSE 0 END),
       sum(CASE WHEN status = 'dlq' THEN 1 ELSE 0 END),
       count(*)
FROM (SELECT namespace_id, CASE WHEN destination_key <> '' THEN destination_key ELSE destination END AS dest,
             status, blocked
      FROM fusebox_tasks WHERE status IN ('pending', 'dlq') LIMIT $1) AS t
GROUP BY namespace_id, dest`, maxScan)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var (
		out     []state.DestinationCount
		scanned int64
	)
	for rows.Next() {
		var c state.DestinationCount
		var pending, blocked, dlq, n int64
		if err := rows.Scan(&c.Namespace, &c.Destination, &pending, &blocked, &dlq, &n); err != nil {
			return nil, false, err
		}
		c.Pending, c.Blocked, c.DLQ = int(pending), int(blocked), int(dlq)
		scanned += n
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	slices.SortFunc(out, func(a, b state.DestinationCount) int {
		if c := cmp.Compare(b.Pending+b.DLQ, a.Pending+a.DLQ); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(a.Destination, b.Destination)
	})
	return out, scanned >= int64(maxScan), nil
}
