package state

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"
)

// applyFunc applies one decoded command inside a write transaction. It returns
// the result value (JSON-marshalled into ApplyResult.Value) or a typed error;
// on error the FSM discards every write the function made. The registration
// table is in logversion.go.
type applyFunc func(w *writer, payload []byte) (any, *Error)

// FSM is the deterministic state machine over a State: the only writer of
// its tables. It knows nothing of raft: package raftstore adapts it to
// raft.FSM (raft.Log → Apply/ApplyBatch, raft.SnapshotSink → Snapshot). The
// caller applies, snapshots and restores from one goroutine; reads go to the
// State concurrently.
type FSM struct {
	state      *State
	logger     *slog.Logger
	logVersion int

	halt   atomic.Pointer[HaltError] // set once, by haltAt
	haltCh chan struct{}             // closed by haltAt
	onHalt func(*HaltError)          // set before the first Apply (OnHalt)

	mu        sync.Mutex
	applied   uint64
	appliedCh chan struct{} // closed and replaced whenever applied advances
}

// NewFSM returns an FSM writing into state, at the state's log version. A
// nil logger discards.
func NewFSM(state *State, logger *slog.Logger) *FSM {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &FSM{state: state, logger: logger, logVersion: state.logVersion, appliedCh: make(chan struct{}), haltCh: make(chan struct{})}
}

// State returns the state the FSM writes.
func (f *FSM) State() *State { return f.state }

// Entry is one log entry as the state machine sees it.
type Entry struct {
	Index uint64
	Data  []byte
	// Command is false for an entry that is the log's own business (a raft
	// configuration change): it gets no result and only moves the applied
	// index.
	Command bool
}

// Apply applies the command entry data at index. It always returns a
// result. Once halted it applies nothing and the applied index stays where
// it stopped.
func (f *FSM) Apply(index uint64, data []byte) *ApplyResult {
	res := f.applyEntry(index, data)
	if f.halt.Load() == nil {
		f.setApplied(index)
	}
	return res
}

// AppliedIndex is the raft index of the last entry applied (or restored).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// WaitForApplied blocks until the FSM has applied index, or ctx ends, or
// the FSM halts short of index (the *HaltError then: nothing at or past
// the halt is ever applied, and a caller waiting out its deadline — a
// result write at shutdown — only delayed the node's stop).
func (f *FSM) WaitForApplied(ctx context.Context, index uint64) error {
	return f.WaitForAppliedOr(ctx, index, nil, nil)
}

// WaitForAppliedOr is WaitForApplied that also gives up once abort is
// closed, with cause's error: the node's store failed, and the index may
// never be applied here.
func (f *FSM) WaitForAppliedOr(ctx context.Context, index uint64, abort <-chan struct{}, cause func() error) error {
	halted := f.haltCh
	for {
		f.mu.Lock()
		applied, ch := f.applied, f.appliedCh
		f.mu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-halted:
			he := f.halt.Load()
			if index >= he.Index {
				return fmt.Errorf("raftstore: waiting for index %d (applied %d): %w", index, applied, he)
			}
			// An entry before the halt, of the halting batch: it is
			// applied, and the applied index moves once the batch ends.
			halted = nil
		case <-abort:
			return fmt.Errorf("raftstore: waiting for index %d (applied %d): %w", index, applied, cause())
		case <-ctx.Done():
			return fmt.Errorf("raftstore: waiting for index %d (applied %d): %w", index, applied, ctx.Err())
		}
	}
}

func (f *FSM) setApplied(index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if index > f.applied {
		f.applied = index
		close(f.appliedCh)
		f.appliedCh = make(chan struct{})
	}
}

// applyEntry applies one entry in its own transaction. A command that fails
// leaves nothing behind but its dedup record (so a retry gets the same
// error), and a panic leaves nothing at all.
func (f *FSM) applyEntry(index uint64, data []byte) (res *ApplyResult) {
	if f.halt.Load() != nil {
		return f.haltResult(index)
	}
	db := f.state.db.Load()
	w := &writer{s: f.state, txn: db.Txn(true), tasks: f.state.tasks.Load().clone(), it: f.state.side.Load().clone(), index: index}
	w.txn.TrackChanges()
	defer func() {
		if p := recover(); p != nil {
			w.txn.Abort()
			f.logger.Error("raftstore: PANIC applying command; nothing written", "index", index, "panic", p)
			res = &ApplyResult{Err: &Error{Code: CodeInternal, Message: fmt.Sprintf("panic applying entry %d: %v", index, p)}}
		}
	}()
	res, requestID, failed := f.applyInto(w, data)
	if f.halt.Load() != nil {
		w.txn.Abort() // not even a dedup record: nothing past the halt
		return res
	}
	if failed {
		// Discard the command's writes; only the dedup record survives.
		w.txn.Abort()
		w.txn = db.Txn(true)
		w.txn.TrackChanges()
		w.tasks = f.state.tasks.Load().clone()
		w.it = f.state.side.Load().clone()
		w.trimRequests()
		if requestID != "" {
			w.it.putRequest(&requestRow{ID: requestID, Index: index, Result: *res})
		}
	}
	f.commit(w.txn, w.tasks, w.it)
	return res
}

// ApplyBatch applies entries handed over together (raft.BatchingFSM) in one
// state transaction, so the transaction's fixed
// cost is paid once per batch instead of once per entry. Every entry sees
// exactly the state it would have seen alone, so replicas stay identical
// whatever the batching. If any command fails (or panics), the batch is
// discarded and applied again one entry per transaction, which keeps a
// failed command's writes out of the state.
// out[i] is nil for an entry that is not a command.
func (f *FSM) ApplyBatch(logs []Entry) []*ApplyResult {
	out := make([]*ApplyResult, len(logs))
	if f.halt.Load() == nil && f.applyShared(logs, out) {
		if n := len(logs); n > 0 {
			f.setApplied(logs[n-1].Index)
		}
		return out
	}
	var last uint64
	for i, l := range logs {
		if l.Command {
			out[i] = f.applyEntry(l.Index, l.Data)
		}
		if f.halt.Load() == nil {
			last = l.Index
		}
	}
	if last > 0 {
		f.setApplied(last)
	}
	return out
}

// applyShared applies every command of logs into one transaction and
// commits it; it reports false, having written nothing, if any failed.
func (f *FSM) applyShared(logs []Entry, out []*ApplyResult) (ok bool) {
	txn := f.state.db.Load().Txn(true)
	txn.TrackChanges()
	tasks := f.state.tasks.Load().clone()
	it := f.state.side.Load().clone()
	defer func() {
		if p := recover(); p != nil {
			txn.Abort()
			ok = false
		}
	}()
	for i, l := range logs {
		if !l.Command {
			continue // configuration changes are raft's own business
		}
		if f.unknownEntry(l.Index, l.Data) != nil {
			txn.Abort() // one by one, so the entries before it apply
			return false
		}
		res, _, failed := f.applyInto(&writer{s: f.state, txn: txn, tasks: tasks, it: it, index: l.Index}, l.Data)
		if failed {
			txn.Abort()
			return false
		}
		out[i] = res
	}
	f.commit(txn, tasks, it)
	return true
}

// applyInto applies one entry's command into w's transaction and records its
// request id for dedup. failed reports that the command (or the entry) was
// refused: the caller must then drop the transaction's writes for it.
func (f *FSM) applyInto(w *writer, data []byte) (res *ApplyResult, requestID string, failed bool) {
	index := w.index
	if he := f.unknownEntry(index, data); he != nil {
		return f.haltAt(he), "", true
	}
	requestID, t, payload, err := DecodeEntry(data)
	if err != nil {
		f.logger.Error("raftstore: undecodable raft entry; returning an error result", "index", index, "error", err)
		return &ApplyResult{Err: invalidArg("command", "undecodable entry at index %d: %v", index, err)}, "", true
	}
	// Forget request ids older than the window first, so "remembered for
	// RequestWindow indexes" holds exactly.
	w.trimRequests()
	if requestID != "" {
		if r := w.it.request(requestID); r != nil {
			out := r.Result // a retry: the first result, nothing applied again
			return &out, requestID, false
		}
	}
	result := ApplyResult{Index: index}
	var v any
	fn, ok := lookupCommand(t, f.logVersion)
	switch {
	case !ok:
		f.logger.Warn("raftstore: skipping an ignorable command type this build does not know", "index", index, "type", uint8(t))
	default:
		var e *Error
		v, e = fn(w, payload)
		if e != nil {
			result.Err = e
			break
		}
		if v == nil {
			break
		}
		var b []byte
		var err error
		if a, ok := v.(jsonAppender); ok {
			b = a.appendJSON(nil)
		} else {
			b, err = json.Marshal(v)
		}
		if err != nil {
			result.Err = &Error{Code: CodeInternal, Message: "marshal result: " + err.Error()}
		} else {
			result.Value = b
		}
	}
	if result.Err != nil {
		return &result, requestID, true
	}
	if requestID != "" {
		w.it.putRequest(&requestRow{ID: requestID, Index: index, Result: result})
	}
	if result.Value != nil {
		result.Typed = typedValue(v) // after the dedup row took its copy
	}
	return &result, requestID, false
}

// commit commits txn, publishes tasks and it (the task table and internal
// tables the same writes went to) and wakes the subscribers of every table
// they touched.
func (f *FSM) commit(txn *memdb.Txn, tasks *taskTable, it *sideTables) {
	changes := txn.Changes()
	txn.Commit()
	shards, lows := tasks.dueShards, tasks.dueLow
	tasks.dueShards, tasks.dueLow = nil, nil // before publishing: a published table is never written
	f.state.tasks.Store(tasks)
	f.state.side.Store(it)
	for shard, at := range lows { // after publishing, before waking the readers (due_lows.go)
		f.state.lows.lower(shard, at)
	}
	var touched map[Table]struct{}
	touch := func(t Table) {
		if touched == nil {
			touched = make(map[Table]struct{}, 2)
		}
		touched[t] = struct{}{}
	}
	if tasks.touched {
		touch(TableTasks)
	}
	if it.historyTouched {
		touch(TableConfigHistory)
	}
	if it.configTouched {
		touch(TableConfig)
	}
	for _, c := range changes {
		touch(Table(c.Table))
	}
	if len(touched) > 0 || len(shards) > 0 {
		f.state.notify(touched, shards)
	}
}

// trimRequests forgets request ids older than the request window, measured in
// raft indexes, so every replica forgets exactly the same ids (the rows
// themselves go in amortised passes: sideTables.forget).
func (w *writer) trimRequests() { w.it.forget(w.index, w.s.requestWindow) }
