// Package pgstore is the postgres task store: tasks, attempts, results and
// the DLQ in a PostgreSQL-compatible database through pgx v5 and its pool,
// fenced by shard epoch as Temporal fences with its range id. Raft keeps
// the control plane (config, endpoints, the shard map, forced breakers).
//
// The SQL is written to run on CockroachDB and YugabyteDB too: no advisory
// locks in the task path, LISTEN/NOTIFY used where the database has it but
// never required (wake.go), and serialization failures (40001) are
// retried. Only PostgreSQL is tested.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/time/rate"
)

// Config configures a Store. URL is required.
type Config struct {
	// URL is a postgres:// connection URL (or a key=value DSN).
	URL string
	// PollInterval is how often subscribers are woken to re-read when no
	// local write woke them (tasks submitted through other nodes);
	// default 200ms. Correctness never depends on a notification. While
	// the store listens for the database's notifications (LISTEN, where the
	// database has it) the backstop wake is every 5 PollIntervals.
	PollInterval time.Duration
	// WakeInterval is how often the store reads the newest task id (one
	// primary-key index probe) and wakes subscribers when it changed: a task
	// submitted through another node is seen within this, not PollInterval.
	// Default 20ms; negative: off (PollInterval alone). Not read while the
	// store listens (notifications say the same sooner, and per shard).
	WakeInterval time.Duration
	// NoListen turns LISTEN/NOTIFY off: writers send no notification and
	// the store does not listen (WakeInterval's read then carries other
	// nodes' submits). For databases without them it is off by itself.
	NoListen bool
	// QueryTimeout bounds each read the queue makes (its reads have no
	// context); default 5s.
	QueryTimeout time.Duration
	// MaxConns is the pool's size; 0: the URL's pool_max_conns when it
	// has one, else DefaultMaxConns (poolConfig).
	MaxConns int32
	Logger   *slog.Logger
}

// Store is the postgres task store.
type Store struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *slog.Logger

	mu   sync.Mutex
	subs map[chan struct{}]int // the subscription's shard, allShards for every shard

	initMu sync.Mutex
	ready  atomic.Bool
	// topShard is the highest shard holding a pending task when Init ran
	// (-1: none): a cluster with fewer shards would never read it.
	topShard  atomic.Int64
	pending   pendingCache  // limits.go
	group     submitGroup   // group.go: concurrent submits committed together
	completes completeGroup // complete_group.go: concurrent result writes committed together

	lows         *dueLows // lows.go
	dueMu        sync.Mutex
	dueSkipHeavy map[int]bool // shards whose last Due skipped more than it took (reads.go)

	readWarn  rate.Sometimes // readFailed (reads.go)
	readFails atomic.Int64

	// plans.go: result writes are planned for their own results (the
	// database has plan_cache_mode and the URL leaves it; probed by Init).
	customPlans atomic.Bool

	// wake.go: the database's wake-ups (LISTEN/NOTIFY where it has them).
	sendNotify atomic.Bool // pg_notify works here (probed by Init): writers send
	listening  atomic.Bool // this store's listener is connected and listening
	badNotices atomic.Int64
	wakeWarn   rate.Sometimes
	// ownPIDs holds the server process ids of this store's pool
	// connections (pgxpool's AfterConnect and BeforeClose): the listener
	// drops the notifications they sent, whose lows were recorded at the
	// write (wake.go, ownNotice).
	ownPIDs *sync.Map // uint32 → struct{}
	// answered is when the database last answered a statement (UnixNano;
	// answered.go).
	answered   *atomic.Int64
	ownNotices atomic.Int64 // notifications of its own dropped (tests)
	// The shards written since the notifier's last notification, each
	// with the earliest due time written there (zero: unknown).
	outMu        sync.Mutex
	outSet       map[int]time.Time
	outAll       bool
	outKick      chan struct{}
	notifierDone chan struct{}

	stop     chan struct{}
	stopCtx  context.Context // cancelled by Close: bounds the poller's reads
	stopRead context.CancelFunc
	done     chan struct{}
	// listenDone is closed when the listener (wake.go) has returned.
	listenDone chan struct{}
}

// Open is New then Init: it connects, migrates the schema (golang-migrate,
// embedded migrations) and starts the subscription poller. It fails when
// the database cannot be reached.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Init(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// New builds the store without touching the database: the pool connects
// on first use, and nothing is ready until Init succeeds. A node calls New
// at start and retries Init while the database is unreachable (its
// /readyz says why), so it can start before PostgreSQL does.
func New(cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("pgstore: URL is required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 5 * time.Second
	}
	if cfg.WakeInterval == 0 {
		cfg.WakeInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pc, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	own := &sync.Map{}
	pc.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		own.Store(c.PgConn().PID(), struct{}{})
		return nil
	}
	pc.BeforeClose = func(c *pgx.Conn) { own.Delete(c.PgConn().PID()) }
	answered := &atomic.Int64{}
	pc.ConnConfig.Tracer = answerTracer{at: answered} // answered.go
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{cfg: cfg, pool: pool, ownPIDs: own, answered: answered, log: cfg.Logger, subs: make(map[chan struct{}]int), dueSkipHeavy: make(map[int]bool), lows: newDueLows(),
		stop: make(chan struct{}), done: make(chan struct{}), listenDone: make(chan struct{}),
		outKick: make(chan struct{}, 1), notifierDone: make(chan struct{}), readWarn: rate.Sometimes{First: 1, Interval: 5 * time.Second},
		wakeWarn: rate.Sometimes{First: 1, Interval: 5 * time.Second}}
	s.stopCtx, s.stopRead = context.WithCancel(context.Background())
	go s.poll()
	go s.listen()
	go s.notifier()
	return s, nil
}

// Init pings the database and migrates the schema; once it has succeeded
// the store is Ready and later calls return at once. Safe to call again
// after a failure.
func (s *Store) Init(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	s.initMu.Lock()
	defer s.initMu.Unlock()
	if s.ready.Load() {
		return nil
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pgstore: %s unreachable: %w", RedactURL(s.cfg.URL), err)
	}
	v, err := migrateUp(s.pool)
	if err != nil {
		return err
	}
	var top int64
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(max(shard), -1) FROM fusebox_tasks WHERE status = 'pending'`).Scan(&top); err != nil {
		return fmt.Errorf("pgstore: the highest shard with pending tasks: %w", err)
	}
	s.topShard.Store(top)
	s.probeNotify(ctx)
	s.probeCustomPlans(ctx)
	s.ready.Store(true)
	s.log.Info("postgres task store open", "url", RedactURL(s.cfg.URL), "schema_version", v)
	return nil
}

// Ready reports whether Init has succeeded (the schema is in place).
func (s *Store) Ready() bool { return s.ready.Load() }

// TopShard is the highest shard that held a pending task when Init ran,
// -1 if none did (or before Init). A cluster with no more shards than
// that never reads those tasks: a cluster started afresh on an older
// one's database with another --shards (node/pgtasks.go refuses to be
// ready then).
func (s *Store) TopShard() int {
	if !s.ready.Load() {
		return -1
	}
	return int(s.topShard.Load())
}

// Close stops the poller and closes the pool.
func (s *Store) Close() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	s.stopRead()
	<-s.done
	<-s.listenDone
	<-s.notifierDone
	s.pool.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// ReadOnly asks the database whether this store's transactions are
// read-only: a hot standby (a URL that followed a failover to the wrong
// server), or default_transaction_read_only set on the database or the
// role. Submits and result writes then fail, though pings and reads
// succeed. A *pgconn.PgError means the database cannot say (a
// PostgreSQL-compatible engine without the setting).
func (s *Store) ReadOnly(ctx context.Context) (bool, error) {
	var v string
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('transaction_read_only')`).Scan(&v); err != nil {
		return false, err
	}
	return v == "on", nil
}

// inTx runs fn in a transaction, again on a serialization failure
// (40001) or a deadlock (40P01), as CockroachDB requires of clients.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		err = pgx.BeginFunc(ctx, s.pool, fn)
		if !retryable(err) {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// retry runs one statement (its own transaction) again on a serialization
// failure or a deadlock, as inTx does.
func (s *Store) retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		err = fn()
		if !retryable(err) {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

var (
	dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)
	// urlPassword is the user:password@ of a URL url.Parse refused (a bad
	// port, say), so an error about it still hides the password.
	urlPassword = regexp.MustCompile(`(://[^:/@]*:)[^@]*@`)
)

// plainParams are the URL parameters RedactURL shows: pgx's and pgxpool's
// settings that hold no secret (file paths, modes, sizes, timeouts). Every
// other parameter's value — password, sslpassword (the client key's
// passphrase), options, and any this list does not know — is hidden.
var plainParams = map[string]bool{
	"sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true, "sslnegotiation": true, "sslsni": true,
	"connect_timeout": true, "application_name": true, "target_session_attrs": true,
	"pool_max_conns": true, "pool_min_conns": true, "pool_min_idle_conns": true, "pool_max_conn_lifetime": true,
	"pool_max_conn_idle_time": true, "pool_health_check_period": true, "pool_max_conn_lifetime_jitter": true,
	"statement_cache_capacity": true, "description_cache_capacity": true, "default_query_exec_mode": true,
}

// RedactURL hides the password of a postgres URL or key=value DSN, and
// every URL parameter not in plainParams, for logs, errors and status
// reads.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		q := u.Query()
		hidden := false
		for k := range q {
			if !plainParams[strings.ToLower(k)] {
				q[k] = []string{"xxxxx"}
				hidden = true
			}
		}
		if hidden {
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return dsnPassword.ReplaceAllString(urlPassword.ReplaceAllString(raw, "${1}xxxxx@"), "${1}xxxxx")
}

// micro rounds t to PostgreSQL's timestamp precision, so what is read back
// equals what was written.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
