package state

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"
)

// Validator checks and canonicalizes a dynamic-config value. The dynamic-config
// package implements it. The proposer runs it before proposing; inside the
// FSM it runs only for the legacy set_config (type 1) entries, which applied
// it when they were written (set_config_value, type 32, does not).
type Validator interface {
	Validate(key, namespace, destination string, value json.RawMessage) (canonical json.RawMessage, err error)
}

// Defaults for StateOptions.
const (
	DefaultHistoryLimit  = 1000
	DefaultRequestWindow = 10000
)

// StateOptions configures a State.
type StateOptions struct {
	// Validator checks config values; nil accepts any valid JSON.
	Validator Validator
	// HistoryLimit is how many config_history entries are kept (default 1000).
	HistoryLimit int
	// RequestWindow is how many raft indexes a request id is remembered for
	// dedup (default 10000).
	RequestWindow uint64
	// LogVersion is the log version the FSM applies at: command types newer
	// than it halt it (default BuildLogVersion()).
	LogVersion int
}

// State is the replicated cluster state: go-memdb for the rarely written
// tables (endpoints, forced breakers, meta); the tasks and the tables written
// by (nearly) every entry (config, config_history, requests, counters) have
// their own copy-on-write B-trees (taskTable, sideTables). It has no
// raft in it: the FSM is its only writer, and reads are lock-free MVCC
// snapshots.
type State struct {
	db            atomic.Pointer[memdb.MemDB]
	tasks         atomic.Pointer[taskTable]
	side          atomic.Pointer[sideTables] // config, history, requests, counters (side_tables.go)
	validator     Validator
	historyLimit  uint64
	requestWindow uint64
	logVersion    int

	lows dueLows // rows entering each shard's due order, for its reader (due_lows.go)

	shardCount atomic.Pointer[shardCountMemo] // ShardCount's answer for the current db

	mu        sync.Mutex                           // subs, shardSubs (subscribe.go)
	subs      map[Table]map[chan struct{}]struct{} // by table
	shardSubs map[int]map[chan struct{}]struct{}   // by shard: due tasks
}

// NewState returns an empty state.
func NewState(opts StateOptions) (*State, error) {
	if opts.HistoryLimit < 0 {
		return nil, fmt.Errorf("raftstore: HistoryLimit must be >= 0, got %d", opts.HistoryLimit)
	}
	if opts.HistoryLimit == 0 {
		opts.HistoryLimit = DefaultHistoryLimit
	}
	if opts.LogVersion <= 0 || opts.LogVersion > LogVersion {
		opts.LogVersion = BuildLogVersion()
	}
	if opts.RequestWindow == 0 {
		opts.RequestWindow = DefaultRequestWindow
	}
	db, err := newDB()
	if err != nil {
		return nil, fmt.Errorf("raftstore: schema: %w", err)
	}
	s := &State{
		validator:     opts.Validator,
		historyLimit:  uint64(opts.HistoryLimit),
		requestWindow: opts.RequestWindow,
		logVersion:    opts.LogVersion,
		subs:          make(map[Table]map[chan struct{}]struct{}),
		shardSubs:     make(map[int]map[chan struct{}]struct{}),
	}
	s.db.Store(db)
	s.tasks.Store(newTaskTable())
	s.side.Store(newSideTables())
	return s, nil
}

func (s *State) read() *memdb.Txn { return s.db.Load().Txn(false) }

// newDB returns an empty database that does not track mutations for
// watches. go-memdb closes a channel per modified radix node on every
// commit so that WatchSets wake; this package never watches (subscribers
// are woken by the FSM after commit, notify), and on a loaded node that
// bookkeeping was 7 % of the CPU. memdb tracks only on its "primary" DB,
// so the state lives in a snapshot of a fresh one, which is an ordinary
// writable MemDB without it.
func newDB() (*memdb.MemDB, error) {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, err
	}
	return db.Snapshot(), nil
}

// Config returns every config entry, ordered by (key, namespace, destination).
func (s *State) Config() []ConfigEntry {
	return s.side.Load().configRows()
}

// ConfigEntry returns one config entry.
func (s *State) ConfigEntry(key, namespace, destination string) (ConfigEntry, bool) {
	if e := s.side.Load().getConfig(key, namespace, destination); e != nil {
		return *e, true
	}
	return ConfigEntry{}, false
}

// ConfigHistory returns up to limit history entries, newest first; limit <= 0
// returns all kept entries.
func (s *State) ConfigHistory(limit int) []HistoryEntry {
	var out []HistoryEntry
	s.side.Load().history.Reverse(func(h *HistoryEntry) bool {
		out = append(out, *h)
		return limit <= 0 || len(out) < limit
	})
	return out
}

// Endpoints returns every endpoint, ordered by name.
func (s *State) Endpoints() []Endpoint {
	return collect[Endpoint](s.read(), string(TableEndpoints))
}

// Endpoint returns one endpoint by name.
func (s *State) Endpoint(name string) (Endpoint, bool) {
	return first[Endpoint](s.read(), string(TableEndpoints), name)
}

// ForcedBreakers returns every forced breaker key. Expiry (Until) is left to
// the consumer, which compares it with its own clock.
func (s *State) ForcedBreakers() []ForcedBreaker {
	return collect[ForcedBreaker](s.read(), string(TableForcedBreakers))
}

// ClusterID returns the cluster id, "" until the first leader set it.
func (s *State) ClusterID() string {
	m, _ := first[metaRow](s.read(), string(TableMeta), metaClusterID)
	return m.ClusterID
}

// ShardCount returns the shard count, 0 until it is set.
func (s *State) ShardCount() int {
	db := s.db.Load()
	if m := s.shardCount.Load(); m != nil && m.db == db {
		return m.n
	}
	m, _ := first[metaRow](db.Txn(false), string(TableMeta), metaShardCount)
	if m.ShardCount > 0 {
		s.shardCount.Store(&shardCountMemo{db: db, n: m.ShardCount})
	}
	return m.ShardCount
}

// shardCountMemo is ShardCount's answer for one database. Every submitted
// task reads the shard count (its shard is chosen by the proposer), and a
// memdb read transaction and lookup per task was about 0.6 % of a
// delivered task's CPU and 0.8 % of its allocations (BenchmarkDelivery
// profiles). Within one database the count, once set, never changes
// (applySetShardCount refuses a different one); a restore installs a new
// database, which a memo for the old one does not match. An unset count
// (0) is never memoized.
type shardCountMemo struct {
	db *memdb.MemDB
	n  int
}

func collect[T any](txn *memdb.Txn, table string) []T {
	it, err := txn.Get(table, "id")
	if err != nil {
		return nil
	}
	var out []T
	for o := it.Next(); o != nil; o = it.Next() {
		out = append(out, *o.(*T))
	}
	return out
}

func first[T any](txn *memdb.Txn, table string, args ...any) (T, bool) {
	var zero T
	o, err := txn.First(table, "id", args...)
	if err != nil || o == nil {
		return zero, false
	}
	return *o.(*T), true
}
