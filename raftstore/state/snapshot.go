package state

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-memdb"
)

// Snapshot stream: JSON lines. The first line is the header; every other line
// is one row {"t": table, "r": row}. Tables are written in allTables order and
// rows in primary-key order, so equal states produce equal bytes.
const (
	snapshotFormat  = "fusebox-raftstore"
	SnapshotVersion = 1
)

type snapshotHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Applied uint64 `json:"applied"`
}

type snapshotRow struct {
	Table string          `json:"t"`
	Row   json.RawMessage `json:"r"`
}

// Snapshot is a point-in-time copy of the state: an O(1) immutable memdb
// snapshot and the published task table (never written again), persisted
// later off the applying goroutine. Equal states persist to equal bytes.
type Snapshot struct {
	db      *memdb.MemDB
	tasks   *taskTable
	it      *sideTables
	applied uint64
}

// Snapshot returns the current state for persisting (raft.FSM.Snapshot). A
// halted FSM refuses: its state stops short of the log's applied index, and
// a snapshot would claim entries it never applied, letting raft drop them.
func (f *FSM) Snapshot() (*Snapshot, error) {
	if he := f.halt.Load(); he != nil {
		return nil, he
	}
	return f.state.snapshotAt(f.AppliedIndex()), nil
}

func (s *State) snapshotAt(applied uint64) *Snapshot {
	return &Snapshot{db: s.db.Load().Snapshot(), tasks: s.tasks.Load(), it: s.side.Load(), applied: applied}
}

// WriteSnapshot writes the state as a snapshot stream whose header claims
// applied (an operator's restore re-encodes a parsed snapshot at the index
// raft will restore it at).
func (s *State) WriteSnapshot(w io.Writer, applied uint64) error {
	return s.snapshotAt(applied).Persist(w)
}

// Persist writes the snapshot stream: JSON lines, header first.
func (s *Snapshot) Persist(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(snapshotHeader{Format: snapshotFormat, Version: SnapshotVersion, Applied: s.applied}); err != nil {
		return fmt.Errorf("raftstore: snapshot header: %w", err)
	}
	txn := s.db.Txn(false)
	row := func(table string, o any) error {
		b, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("raftstore: snapshot %s row: %w", table, err)
		}
		if err := enc.Encode(snapshotRow{Table: table, Row: b}); err != nil {
			return fmt.Errorf("raftstore: snapshot %s: %w", table, err)
		}
		return nil
	}
	for _, table := range allTables {
		var err error
		switch table {
		case string(TableTasks):
			s.tasks.byID.Scan(func(t *Task) bool {
				err = row(table, t)
				return err == nil
			})
		case string(TableConfig):
			s.it.config.Scan(func(e *ConfigEntry) bool {
				err = row(table, e)
				return err == nil
			})
		case string(TableConfigHistory):
			s.it.history.Scan(func(h *HistoryEntry) bool {
				err = row(table, h)
				return err == nil
			})
		case tableRequests:
			s.it.scanRequests(func(r *requestRow) bool {
				err = row(table, r)
				return err == nil
			})
		case tableCounters:
			s.it.scanCounters(func(c *counterRow) bool {
				err = row(table, c)
				return err == nil
			})
		default:
			err = persistTable(txn, table, row)
		}
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// persistTable writes the rows of a go-memdb table in primary-key order.
func persistTable(txn *memdb.Txn, table string, row func(string, any) error) error {
	it, err := txn.Get(table, "id")
	if err != nil {
		return fmt.Errorf("raftstore: snapshot %s: %w", table, err)
	}
	for o := it.Next(); o != nil; o = it.Next() {
		if err := row(table, o); err != nil {
			return err
		}
	}
	return nil
}

// Restore (raft.FSM.Restore) rebuilds a fresh memdb from the stream and
// swaps it in only when the whole stream was read, then wakes every
// subscriber.
func (f *FSM) Restore(r io.Reader) error {
	if he := f.halt.Load(); he != nil {
		return he
	}
	db, tasks, it, applied, err := readSnapshot(r)
	if err != nil {
		f.logger.Error("raftstore: snapshot restore failed; state unchanged", "error", err)
		return err
	}
	lows := tasks.dueLow
	tasks.dueShards, tasks.dueLow = nil, nil // every subscriber is woken below
	f.state.side.Store(it)
	f.state.tasks.Store(tasks)
	f.state.db.Store(db)
	for shard := range lows { // every shard with pending rows: read it all
		f.state.lows.lower(shard, time.Time{})
	}
	f.mu.Lock()
	f.applied = applied
	close(f.appliedCh)
	f.appliedCh = make(chan struct{})
	f.mu.Unlock()
	f.state.notifyAll()
	return nil
}

// ParseSnapshot decodes a snapshot stream with the FSM's own parser (so
// everything a restore would refuse is refused) into a State nobody serves,
// and returns the applied index its header claims.
func ParseSnapshot(r io.Reader) (*State, uint64, error) {
	db, tasks, it, applied, err := readSnapshot(r)
	if err != nil {
		return nil, 0, err
	}
	st, err := NewState(StateOptions{})
	if err != nil {
		return nil, 0, err
	}
	st.db.Store(db)
	st.tasks.Store(tasks)
	st.side.Store(it)
	return st, applied, nil
}

func readSnapshot(r io.Reader) (*memdb.MemDB, *taskTable, *sideTables, uint64, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var h snapshotHeader
	if err := dec.Decode(&h); err != nil {
		return nil, nil, nil, 0, fmt.Errorf("raftstore: snapshot header: %w", err)
	}
	if h.Format != snapshotFormat || h.Version != SnapshotVersion {
		return nil, nil, nil, 0, fmt.Errorf("raftstore: unsupported snapshot %q version %d", h.Format, h.Version)
	}
	db, err := newDB()
	if err != nil {
		return nil, nil, nil, 0, err
	}
	tasks := newTaskTable()
	it := newSideTables()
	txn := db.Txn(true)
	defer txn.Abort()
	for {
		var row snapshotRow
		if err := dec.Decode(&row); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, nil, nil, 0, fmt.Errorf("raftstore: snapshot row: %w", err)
		}
		obj, err := decodeRow(row)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		if t, ok := obj.(*Task); ok {
			if err := tasks.restore(t); err != nil {
				return nil, nil, nil, 0, err
			}
			continue
		}
		switch row.Table {
		case string(TableConfig), string(TableConfigHistory), tableRequests, tableCounters:
			if err := it.restoreRow(obj); err != nil {
				return nil, nil, nil, 0, err
			}
			continue
		}
		if err := txn.Insert(row.Table, obj); err != nil {
			return nil, nil, nil, 0, fmt.Errorf("raftstore: snapshot insert %s: %w", row.Table, err)
		}
	}
	txn.Commit()
	return db, tasks, it, h.Applied, nil
}

func decodeRow(row snapshotRow) (any, error) {
	var obj any
	switch row.Table {
	case string(TableConfig):
		obj = new(ConfigEntry)
	case string(TableConfigHistory):
		obj = new(HistoryEntry)
	case string(TableEndpoints):
		obj = new(Endpoint)
	case string(TableForcedBreakers):
		obj = new(ForcedBreaker)
	case string(TableMeta):
		obj = new(metaRow)
	case tableRequests:
		obj = new(requestRow)
	case tableCounters:
		obj = new(counterRow)
	case string(TableTasks):
		obj = new(Task)
	default:
		return nil, fmt.Errorf("raftstore: snapshot has unknown table %q", row.Table)
	}
	if err := json.Unmarshal(row.Row, obj); err != nil {
		return nil, fmt.Errorf("raftstore: snapshot %s row: %w", row.Table, err)
	}
	if m, ok := obj.(*metaRow); ok && m.Shards != nil {
		if err := m.Shards.Validate(); err != nil {
			return nil, fmt.Errorf("raftstore: snapshot shard map: %w", err)
		}
	}
	return obj, nil
}
