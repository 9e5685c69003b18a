package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"fusebox/raftstore/state"
)

// destExpr is the breaker destination a row counts against for the
// submit limits (its DestinationKey, else its Destination); the index
// fusebox_tasks_dest_pending is on the same expression.
const destExpr = `(CASE WHEN destination_key <> '' THEN destination_key ELSE destination END)`

// pendingTTL is how long a count of all pending tasks is reused: counting
// is O(pending), and the limit it feeds (fusebox.tasks.maxPendingTasks) is
// a ceiling against runaway growth, not an exact quota.
const pendingTTL = time.Second

// pendingCache is the last count of pending tasks, moved by this store's
// own submits and dropped by its completes and redrives.
type pendingCache struct {
	mu sync.Mutex
	n  int
	at time.Time
}

func (c *pendingCache) get(now time.Time) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || now.Sub(c.at) > pendingTTL {
		return 0, false
	}
	return c.n, true
}

func (c *pendingCache) set(n int, now time.Time) {
	c.mu.Lock()
	c.n, c.at = n, now
	c.mu.Unlock()
}

func (c *pendingCache) add(d int) {
	c.mu.Lock()
	c.n += d
	c.mu.Unlock()
}

func (c *pendingCache) drop() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

func breakerDest(t *state.NewTask) string {
	if t.DestinationKey != "" {
		return t.DestinationKey
	}
	return t.Destination
}

// overloaded decides, just before the submit's INSERT, which tasks a limit
// they carry refuses, with the raft store's rules: a task whose request id
// is already stored (or accepted earlier in the batch) is a duplicate,
// never refused; the counts include the batch's tasks accepted before it.
// Unlike the raft store's FSM, concurrent submits through other nodes are
// not serialised with this one: a limit can be overshot by the tasks of
// submits in flight at the same moment, the pending-task ceiling by a
// second's worth (pendingTTL), and a destination's backlog limit by other
// nodes' submits of that second only when they alone bring more than half
// the limit (destBound).
func (s *Store) overloaded(ctx context.Context, tx batchQueryer, tasks []state.NewTask) (map[int]string, error) {
	limited := false
	for i := range tasks {
		if tasks[i].MaxDestinationBacklog > 0 || tasks[i].MaxPendingTasks > 0 {
			limited = true
			break
		}
	}
	if !limited {
		return nil, nil
	}
	// The reads the limits need go in one round trip (a pipelined batch):
	// the stored request ids and the pending count of each destination
	// with a backlog limit that the pending total does not already rule
	// out (destBound); the total itself, when its reuse ran out, before.
	reads := &pgx.Batch{}
	stored := queueStoredRequests(reads, tasks)
	// Each destination with a backlog limit, with the smallest limit the
	// batch's tasks for it carry (they share one, unless the setting
	// changed while they queued).
	destLimit := map[[2]string]int{}
	for i := range tasks {
		t := &tasks[i]
		if t.MaxDestinationBacklog <= 0 {
			continue
		}
		dkey := [2]string{t.NamespaceID, breakerDest(t)}
		if l, ok := destLimit[dkey]; !ok || t.MaxDestinationBacklog < l {
			destLimit[dkey] = t.MaxDestinationBacklog
		}
	}
	// The total first, read again when its reuse ran out (once a second
	// per node): it decides which destinations need a count of their own.
	total, err := s.pendingTotal(ctx, tx)
	if err != nil {
		return nil, err
	}
	destCount := make(map[[2]string]int, len(destLimit)) // read once per destination
	for dkey, limit := range destLimit {
		if destBound(total, len(tasks), limit) {
			destCount[dkey] = max(total, 0) // an upper bound, far below the limit
			continue
		}
		reads.Queue(destBacklogSQL, dkey[0], dkey[1]).QueryRow(func(row pgx.Row) error {
			var c int64
			err := row.Scan(&c)
			destCount[dkey] = int(c)
			return err
		})
	}
	if reads.Len() > 0 {
		if err := tx.SendBatch(ctx, reads).Close(); err != nil {
			return nil, err
		}
	}
	refused := map[int]string{}
	destAdded := map[[2]string]int{} // accepted earlier in this batch
	added := 0
	for i := range tasks {
		t := &tasks[i]
		rkey := [2]string{t.NamespaceID, t.RequestID}
		if t.RequestID != "" && stored[rkey] {
			continue // a duplicate: the insert keeps it out
		}
		dkey := [2]string{t.NamespaceID, breakerDest(t)}
		if t.MaxDestinationBacklog > 0 && destCount[dkey]+destAdded[dkey] >= t.MaxDestinationBacklog {
			refused[i] = state.OverloadDestination
			continue
		}
		if t.MaxPendingTasks > 0 && total+added >= t.MaxPendingTasks {
			refused[i] = state.OverloadPending
			continue
		}
		destAdded[dkey]++
		added++
		if t.RequestID != "" {
			stored[rkey] = true // a later task of the batch with it is a duplicate
		}
	}
	return refused, nil
}

// destBacklogSQL counts the pending tasks of namespace $1 for breaker
// destination $2: the backlog limit's read and DestinationBacklog's.
const destBacklogSQL = `SELECT count(*) FROM fusebox_tasks
WHERE status = 'pending' AND namespace_id = $1 AND ` + destExpr + ` = $2`

// destBound reports whether the table's pending total (reused for up to
// pendingTTL, moved by this store's own submits and completes) rules out a
// destination backlog limit for a batch of n tasks: a destination's pending
// tasks are some of the table's, so while the total and the batch stay
// under half the limit, its count (O(its backlog), and read on every
// submit group of every node) cannot come near it. The half is the margin
// for other nodes' submits of the last second, which the reused total does
// not see: they would have to add half the limit within it. Past half the
// limit every group counts the destination afresh, as before.
func destBound(total, n, limit int) bool {
	return total+n <= limit/2
}

// storedRequestsSQL reads which of the (namespace, request id) pairs
// $1, $2 are stored. Each pair is a probe of the unique request index
// (LATERAL … LIMIT 1): as a join, the planner took a hash join over a scan
// of the whole task table whenever its statistics were stale — a table
// that grew faster than autovacuum analyzes it, as after a start or an
// import: 60 ms against 3 ms for 500 pairs in 60,000 rows
// (TestRequestLookupsProbeTheIndex). CockroachDB and YugabyteDB run
// LATERAL too.
const storedRequestsSQL = `SELECT d.ns, d.rid FROM unnest($1::text[], $2::text[]) AS d(ns, rid)
CROSS JOIN LATERAL (SELECT 1 FROM fusebox_tasks t WHERE t.namespace_id = d.ns AND t.request_id = d.rid LIMIT 1) AS hit`

// duplicateRequestsSQL is storedRequestsSQL returning the stored task's id
// and shard.
const duplicateRequestsSQL = `SELECT d.ns, d.rid, t.id, t.shard FROM unnest($1::text[], $2::text[]) AS d(ns, rid)
CROSS JOIN LATERAL (SELECT id, shard FROM fusebox_tasks WHERE namespace_id = d.ns AND request_id = d.rid LIMIT 1) AS t`

// queueStoredRequests queues on b the read of which (namespace, request
// id) pairs of tasks are already stored, into the map it returns (filled
// when b runs).
func queueStoredRequests(b *pgx.Batch, tasks []state.NewTask) map[[2]string]bool {
	var nss, rids []string
	for i := range tasks {
		if tasks[i].RequestID != "" {
			nss, rids = append(nss, tasks[i].NamespaceID), append(rids, tasks[i].RequestID)
		}
	}
	out := map[[2]string]bool{}
	if len(nss) == 0 {
		return out
	}
	b.Queue(storedRequestsSQL, nss, rids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k [2]string
			if err := rows.Scan(&k[0], &k[1]); err != nil {
				return err
			}
			out[k] = true
		}
		return rows.Err()
	})
	return out
}

// querier is a pool, a connection or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queryer runs a statement that returns rows (a pool, a connection or a
// transaction).
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// batchQueryer also reads a row and sends a pipelined batch.
type batchQueryer interface {
	queryer
	querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pendingTotal is the number of pending tasks in all shards, reused for
// pendingTTL.
func (s *Store) pendingTotal(ctx context.Context, q querier) (int, error) {
	now := time.Now()
	if n, ok := s.pending.get(now); ok {
		return n, nil
	}
	var c int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM fusebox_tasks WHERE status = 'pending'`).Scan(&c); err != nil {
		return 0, err
	}
	s.pending.set(int(c), now)
	return int(c), nil
}

// PendingTasks is the number of pending tasks in all shards, at most
// pendingTTL old (-1 when the database does not answer).
func (s *Store) PendingTasks(ctx context.Context) int {
	n, err := s.pendingTotal(ctx, s.pool)
	if err != nil {
		return -1
	}
	return n
}

// DestinationBacklog is the number of pending tasks of namespace for the
// breaker destination (-1 when the database does not answer).
func (s *Store) DestinationBacklog(ctx context.Context, namespace, destination string) int {
	var c int64
	if err := s.pool.QueryRow(ctx, destBacklogSQL, namespace, destination).Scan(&c); err != nil {
		return -1
	}
	return int(c)
}
