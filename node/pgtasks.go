package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"fusebox/api"
	"fusebox/queue"
	"fusebox/raftstore/state"
	"fusebox/taskstore/pgstore"
)

// Task store kinds (--task-store).
const (
	TaskStoreRaft     = "raft"
	TaskStorePostgres = "postgres"
)

// pgRaftCommitTimeout is the CommitTimeout of a node whose tasks live in
// PostgreSQL, where only control-plane writes go through Raft. The Raft
// task store's short one (so a follower owning a shard sees a new task
// soon) has the leader send an empty append to every follower every 5–10
// ms, raft's own default every 50–100 ms; on an idle cluster those are
// most of its CPU, and they grow with each node (taskstore/pgstore/
// DESIGN.md, "Where the CPU and the latency go with more nodes"). Here the
// leader pushes each write's commit to the followers itself
// (raftstore.Config.PushCommits), so the empty appends are only a
// backstop, and rare.
const pgRaftCommitTimeout = 500 * time.Millisecond

// raftCommitTimeout is the Raft store's CommitTimeout for this node: 0 (the
// preset's) unless tasks live in PostgreSQL.
func (n *Node) raftCommitTimeout() time.Duration {
	if n.cfg.UsesPostgres() {
		return pgRaftCommitTimeout
	}
	return 0
}

// pgTasks is the postgres task store of a node started with --task-store
// postgres: tasks, attempts, results and the DLQ in PostgreSQL; Raft keeps
// the control plane. The store is built at start without touching the
// database; a loop owned here retries its Init (ping, migrations) with
// backoff until it succeeds, and until then /readyz says why and submits
// are refused with a 503 (never a 202 for a task not committed).
type pgTasks struct {
	store   *pgstore.Store
	lastErr atomic.Pointer[string] // why the last Init failed (pgstore.PublicReason); nil once open
	// failedLook is when the last look at the path failed while this node
	// advertises that it cannot reach the database and another member
	// reaches it (UnixNano; 0 otherwise; pghealth.go). Until the database
	// answers a statement after it (failing), task reads and writes are
	// refused at once instead of waiting on connections that do not
	// answer, and no call starts.
	failedLook atomic.Int64
	// shardsLogged logs a shard count below the database's once.
	shardsLogged sync.Once
	// shared is another cluster seen using the database lately, nil when
	// none is (pghealth.go, checkClusters).
	shared atomic.Pointer[pgstore.OtherCluster]
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Init backoff: first retry after initBackoffMin, doubling to initBackoffMax.
const (
	initBackoffMin = 100 * time.Millisecond
	initBackoffMax = 5 * time.Second
)

// openPostgres builds the store and starts the loop that opens it.
func (n *Node) openPostgres() (*pgTasks, error) {
	s, err := pgstore.New(pgstore.Config{URL: n.cfg.PostgresURL, Logger: n.log.With("component", "pgstore")})
	if err != nil {
		return nil, err // names no password (pgstore redacts)
	}
	p := &pgTasks{store: s}
	msg := "not connected yet"
	p.lastErr.Store(&msg)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.initLoop(ctx, n)
	}()
	return p, nil
}

func (p *pgTasks) initLoop(ctx context.Context, n *Node) {
	wait := initBackoffMin
	for try := 1; ; try++ {
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := p.store.Init(ictx)
		cancel()
		if err == nil {
			p.lastErr.Store(nil)
			return
		}
		msg := pgstore.PublicReason(err)
		p.lastErr.Store(&msg)
		if try == 1 || try%10 == 0 {
			n.log.Warn("postgres task store not open yet; retrying", "try", try, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, initBackoffMax)
	}
}

// usable reports whether task reads and writes may go to the database:
// it is open, and this node has not found it unreachable.
func (p *pgTasks) usable() bool { return p.store.Ready() && !p.failing() }

// failing: this node advertises the database unreachable, its last look
// failed, and no statement was answered since (one that is, from a reader
// retrying, lifts it at once, not at the next look).
func (p *pgTasks) failing() bool {
	at := p.failedLook.Load()
	return at != 0 && p.store.LastAnswer().UnixNano() <= at
}

// open reports whether the store is open, and if not why.
func (p *pgTasks) open() (bool, string) {
	if p.store.Ready() {
		return true, ""
	}
	if e := p.lastErr.Load(); e != nil {
		return false, *e
	}
	return false, "not connected yet"
}

// readyDetail adds the task store to /readyz: open, holding no pending
// task of a shard the cluster (shards, 0 while unknown) does not have, and
// answering a query with its transactions writable. /readyz needs no
// token, so it says why as pgstore.PublicReason does: no URL, host, user
// or database name (the log has the whole error).
func (p *pgTasks) readyDetail(detail map[string]any, shards int, log *slog.Logger) bool {
	detail["task_store"] = TaskStorePostgres
	if ok, why := p.open(); !ok {
		detail["task_store_error"] = "postgres task store not open: " + why
		return false
	}
	if o := p.shared.Load(); o != nil {
		detail["task_store_error"] = fmt.Sprintf("another fusebox cluster (id %s, seen %s ago) uses this task store; two clusters on one database fence each other out: give each its own database", o.ClusterID, o.Ago.Round(time.Second))
		return false
	}
	if top := p.store.TopShard(); shards > 0 && top >= shards {
		// A cluster started afresh on an older cluster's database with
		// another --shards: no node would ever read those tasks.
		msg := fmt.Sprintf("the database holds pending tasks of shard %d, but this cluster has %d shards, so no node would deliver them: it was left by a cluster with more shards. Start this cluster afresh with --shards set to that cluster's count (at least %d)", top, shards, top+1)
		detail["task_store_error"] = msg
		p.shardsLogged.Do(func() { log.Error("postgres task store: " + msg) })
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ro, err := p.store.ReadOnly(ctx) // a round trip: the ping
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe): // answered, but cannot say: as good as a ping
	case err != nil:
		detail["task_store_error"] = "postgres task store unreachable: " + pgstore.PublicReason(err)
		return false
	case ro:
		// Every submit and result write fails while pings pass: say so
		// here rather than only in each refused submit's 503.
		detail["task_store_error"] = "postgres task store is read-only (a hot standby, or default_transaction_read_only): submits and result writes are refused"
		return false
	}
	return true
}

// close stops the open loop and closes the pool.
func (p *pgTasks) close() {
	if p == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
	p.store.Close()
}

// shardStats is Node.shardStats over the database.
func (p *pgTasks) shardStats(shard int) (backlog int, ackLevel uint64, ok bool) {
	if !p.store.Ready() {
		return 0, 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := p.store.ShardStats(ctx, shard)
	if err != nil {
		return 0, 0, false
	}
	if !oldest.IsZero() {
		ackLevel = uint64(oldest.UnixMilli())
	}
	return n, ackLevel, true
}

// pgReadTimeout bounds the API's reads that have no context of their own.
const pgReadTimeout = 5 * time.Second

// pgTaskAPI is the API's api.TaskService on the postgres store: the
// task reads and writes go to the database; the control plane (endpoints,
// shard count, limits, redaction, destination checks) stays the raft
// TaskAPI's.
type pgTaskAPI struct {
	*TaskAPI
	pg *pgTasks
}

var (
	_ api.TaskService   = pgTaskAPI{}
	_ api.TaskReaderCtx = pgTaskAPI{}
	_ api.TaskListerCtx = pgTaskAPI{}
	_ api.TaskCounter   = pgTaskAPI{}
	_ queue.Store       = (*pgstore.Store)(nil)
)

// unavailable is the 503 of a task write or read the database did not
// answer: nothing is known committed, retry.
func (a pgTaskAPI) unavailable(what string, err error) error {
	msg := "the task store (postgres) is not open yet"
	if ok, why := a.pg.open(); !ok {
		msg += ": " + why
	} else if err != nil {
		msg = "the task store (postgres) did not answer: " + err.Error()
	} else if a.pg.failing() {
		msg = "the task store (postgres) is unreachable from this node; another node may reach it"
	}
	return &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, RetryAfter: 1,
		Message: what + ": " + msg + "; retry"}
}

// SubmitTasks inserts the tasks; an error is a 503 and means none is known
// committed. The index is 0 (nothing to wait for: the row is read back
// from the database).
func (a pgTaskAPI) SubmitTasks(ctx context.Context, c state.SubmitTasksCommand) ([]state.SubmitOutcome, uint64, error) {
	if !a.pg.usable() {
		return nil, 0, a.unavailable("submit refused", nil)
	}
	at := c.At
	if at.IsZero() {
		at = time.Now()
	}
	out, err := a.pg.store.Submit(ctx, pgstore.KeyedByRequest(c.Tasks, c.RequestID), at)
	if err != nil {
		return nil, 0, a.unavailable("submit not committed", err)
	}
	return out, 0, nil
}

// RedriveTasks implements api.TaskService.
func (a pgTaskAPI) RedriveTasks(ctx context.Context, c state.RedriveTasksCommand) (state.RedriveOutcome, error) {
	if !a.pg.usable() {
		return state.RedriveOutcome{}, a.unavailable("redrive refused", nil)
	}
	at := c.At
	if at.IsZero() {
		at = time.Now()
	}
	out, err := a.pg.store.Redrive(ctx, c.IDs, c.All, at)
	if err != nil {
		return out, a.unavailable("redrive not committed", err)
	}
	return out, nil
}

// WaitForApplied implements api.TaskService: a committed row is
// readable at once.
func (pgTaskAPI) WaitForApplied(context.Context, uint64) error { return nil }

// TaskCtx implements api.TaskReaderCtx.
func (a pgTaskAPI) TaskCtx(ctx context.Context, id string) (state.Task, bool, error) {
	if !a.pg.usable() {
		return state.Task{}, false, a.unavailable("read refused", nil)
	}
	t, ok, err := a.pg.store.Task(ctx, id)
	if err != nil {
		return t, false, a.unavailable("read failed", err)
	}
	return t, ok, nil
}

// Task implements api.TaskService (the handlers use TaskCtx).
func (a pgTaskAPI) Task(id string) (state.Task, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), pgReadTimeout)
	defer cancel()
	t, ok, _ := a.TaskCtx(ctx, id)
	return t, ok
}

// ListTasksPageCtx implements api.TaskListerCtx.
func (a pgTaskAPI) ListTasksPageCtx(ctx context.Context, q state.TaskQuery) ([]state.Task, string, error) {
	if !a.pg.usable() {
		return nil, "", a.unavailable("listing refused", nil)
	}
	out, next, err := a.pg.store.ListTasksPage(ctx, q)
	if err != nil {
		return nil, "", a.unavailable("listing failed", err)
	}
	return out, next, nil
}

// ListTasksPage implements api.TaskService (the handlers use
// ListTasksPageCtx).
func (a pgTaskAPI) ListTasksPage(q state.TaskQuery) ([]state.Task, string) {
	ctx, cancel := context.WithTimeout(context.Background(), pgReadTimeout)
	defer cancel()
	out, next, _ := a.ListTasksPageCtx(ctx, q)
	return out, next
}

// DestinationBacklog implements api.TaskService: the guard's early
// check (-1 when the database does not answer: the submit then decides).
func (a pgTaskAPI) DestinationBacklog(namespace, destination string) int {
	if !a.pg.usable() {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgReadTimeout)
	defer cancel()
	return a.pg.store.DestinationBacklog(ctx, namespace, destination)
}

// RememberedSubmit reports any dedup id as remembered, with no answer: the
// store may hold tasks of it (KeyedByRequest), which only the INSERT finds,
// so a submit with an X-Request-Id skips the API's local backlog check and
// the store decides (a retry of an accepted submit must get its task, not
// a 429 the task itself filled). The store never remembers a refusal.
func (a pgTaskAPI) RememberedSubmit(id string) ([]state.SubmitOutcome, bool) { return nil, id != "" }

// PendingTasks implements api.TaskService (-1: no answer).
func (a pgTaskAPI) PendingTasks() int {
	if !a.pg.usable() {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgReadTimeout)
	defer cancel()
	return a.pg.store.PendingTasks(ctx)
}

// pgCountsTimeout bounds the status page's counts query.
const pgCountsTimeout = 5 * time.Second

// DestinationCounts is api.TaskCounter on the database (the raft
// TaskAPI's would count the raft store's task table, empty in this mode).
// A database that does not answer gives no rows, marked partial: the page
// shows what it has and asks again at its next refresh.
func (a pgTaskAPI) DestinationCounts(maxScan int) ([]state.DestinationCount, bool) {
	if !a.pg.usable() {
		return nil, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgCountsTimeout)
	defer cancel()
	out, partial, err := a.pg.store.DestinationCounts(ctx, maxScan)
	if err != nil {
		return nil, true
	}
	return out, partial
}
