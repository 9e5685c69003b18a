package state

import (
	"fmt"

	"github.com/tidwall/btree"
)

// sideTables holds the tables written by (nearly) every entry — the
// internal requests (dedup) and counters, config and config_history — as
// copy-on-write B-trees (github.com/tidwall/btree) versioned like the task
// table: the FSM writes into a clone of the published value and publishes
// it on commit; a published value is never written again, so readers use
// it without locks.
//
// Why not go-memdb (where they were): every command entry wrote a dedup row
// and trimmed one, every task command and config change rewrote a counter
// row, and every config change wrote its row and a history row and deleted
// the oldest; each such memdb write copies the radix path of every index of
// its table and leaves the old path to the GC. Under BenchmarkRaftWrite (64 writers,
// one entry per call) those writes were most of the FSM's time, on every
// replica. Here a dedup row is two tree writes (by id, by index), a counter,
// a config or a history row one, each copying a node only the first time a
// batch reaches it.
//
// Forgetting request ids (RequestWindow) is by index only, as before, but
// amortised: floor is the index at or below which a row is forgotten (a
// lookup skips it, a snapshot leaves it out), and the rows are deleted in
// one pass once floor has moved trimStep past the last pass. The visible
// state — what a lookup answers, what a snapshot holds — is therefore
// exactly what per-entry trimming gave, on every replica.
type sideTables struct {
	requests *btree.BTreeG[*requestRow]   // by ID (unique): dedup lookups, snapshot order
	byIndex  *btree.BTreeG[*requestRow]   // by Index, ID: trimming, oldest first
	counters *btree.Map[string, uint64]   // name → value, snapshot order by name
	history  *btree.BTreeG[*HistoryEntry] // config_history by Index
	config   *btree.BTreeG[*ConfigEntry]  // config by Key, Namespace, Destination

	historyTouched bool // history written since clone (subscribers are woken on commit)
	configTouched  bool // config written since clone

	cfgPivot ConfigEntry // the writer's config search key

	floor   uint64 // rows with Index <= floor are forgotten
	trimmed uint64 // floor of the last deleting pass

	pivot requestRow // the writer's search key, reused: one per lookup escaped to the heap
}

func lessRequestID(a, b *requestRow) bool { return a.ID < b.ID }

func lessRequestIndex(a, b *requestRow) bool {
	if a.Index != b.Index {
		return a.Index < b.Index
	}
	return a.ID < b.ID
}

func lessHistory(a, b *HistoryEntry) bool { return a.Index < b.Index }

// lessConfig orders config rows by key, namespace, destination: the order
// of go-memdb's index over the three joined with NUL, since none of them
// may hold a control character (CheckName).
func lessConfig(a, b *ConfigEntry) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Destination < b.Destination
}

func newSideTables() *sideTables {
	opts := btree.Options{NoLocks: true} // one writer; published versions are read-only
	return &sideTables{
		requests: btree.NewBTreeGOptions(lessRequestID, opts),
		byIndex:  btree.NewBTreeGOptions(lessRequestIndex, opts),
		counters: btree.NewMap[string, uint64](0),
		history:  btree.NewBTreeGOptions(lessHistory, opts),
		config:   btree.NewBTreeGOptions(lessConfig, opts),
	}
}

// clone returns a writable version sharing every node with it. Only the
// writer may call it.
func (it *sideTables) clone() *sideTables {
	return &sideTables{
		requests: it.requests.Copy(), byIndex: it.byIndex.Copy(), counters: it.counters.Copy(),
		history: it.history.Copy(), config: it.config.Copy(), floor: it.floor, trimmed: it.trimmed,
	}
}

// trimStep bounds how far floor runs ahead of the deleted rows: a deleting
// pass every window/32 indexes (at least 1), so at most 1/32 more rows are
// held than are remembered.
func trimStep(window uint64) uint64 { return max(window/32, 1) }

// forget moves floor to index − window (for the command entry at index) and,
// every trimStep, deletes the rows at or below it.
func (it *sideTables) forget(index, window uint64) {
	if index <= window {
		return
	}
	if f := index - window; f > it.floor {
		it.floor = f
	}
	if it.floor-it.trimmed < trimStep(window) {
		return
	}
	for {
		r, ok := it.byIndex.Min()
		if !ok || r.Index > it.floor {
			break
		}
		it.byIndex.PopMin()
		it.requests.Delete(r)
	}
	it.trimmed = it.floor
}

// remembered returns the row of a write with request id, if remembered
// (not yet forgotten). Safe on a published version (no pivot).
func (it *sideTables) remembered(id string) (*requestRow, bool) {
	r, ok := it.requests.Get(&requestRow{ID: id})
	if !ok || it.forgotten(r) {
		return nil, false
	}
	return r, true
}

// request returns the remembered result of id, or nil (never seen, or
// forgotten). Writer only (it uses pivot).
func (it *sideTables) request(id string) *requestRow {
	it.pivot.ID = id
	r, ok := it.requests.Get(&it.pivot)
	it.pivot.ID = ""
	if !ok || it.forgotten(r) {
		return nil
	}
	return r
}

// forgotten reports whether r is past the window. A floor of 0 forgets
// nothing (no command has passed the window since a restore), so a
// restored row of index 0 stays until the next command, as it did.
func (it *sideTables) forgotten(r *requestRow) bool { return it.floor > 0 && r.Index <= it.floor }

// putRequest remembers r, replacing a row of the same id (a forgotten one
// not yet deleted, or a snapshot's duplicate, where the last row won in
// go-memdb too).
func (it *sideTables) putRequest(r *requestRow) {
	if old, ok := it.requests.Set(r); ok {
		it.byIndex.Delete(old)
	}
	it.byIndex.Set(r)
}

// counter returns a counter's value, 0 if it was never set.
func (it *sideTables) counter(name string) uint64 {
	v, _ := it.counters.Get(name)
	return v
}

// setCounter sets a counter; a counter once set stays (even at 0), as its
// row did.
func (it *sideTables) setCounter(name string, v uint64) { it.counters.Set(name, v) }

// scanRequests calls fn for every remembered row in id order (the
// snapshot's order) until fn returns false.
func (it *sideTables) scanRequests(fn func(*requestRow) bool) {
	it.requests.Scan(func(r *requestRow) bool {
		if it.forgotten(r) {
			return true
		}
		return fn(r)
	})
}

// scanCounters calls fn for every counter in name order until fn returns
// false.
func (it *sideTables) scanCounters(fn func(*counterRow) bool) {
	it.counters.Scan(func(name string, v uint64) bool {
		return fn(&counterRow{Name: name, Value: v})
	})
}

// putHistory adds a config_history row (replacing one of the same index,
// as go-memdb's primary key did).
func (it *sideTables) putHistory(h *HistoryEntry) {
	it.historyTouched = true
	it.history.Set(h)
}

// popHistory deletes the oldest config_history row; false if there is none.
func (it *sideTables) popHistory() bool {
	_, ok := it.history.PopMin()
	it.historyTouched = it.historyTouched || ok
	return ok
}

// configRow returns the config row of (key, namespace, destination), or
// nil. Writer only (it uses cfgPivot).
func (it *sideTables) configRow(key, namespace, destination string) *ConfigEntry {
	it.cfgPivot.Key, it.cfgPivot.Namespace, it.cfgPivot.Destination = key, namespace, destination
	e, _ := it.config.Get(&it.cfgPivot)
	it.cfgPivot = ConfigEntry{}
	return e
}

// getConfig is configRow for readers of a published version.
func (it *sideTables) getConfig(key, namespace, destination string) *ConfigEntry {
	e, _ := it.config.Get(&ConfigEntry{Key: key, Namespace: namespace, Destination: destination})
	return e
}

// putConfig stores e, replacing the row of its key, namespace and
// destination.
func (it *sideTables) putConfig(e *ConfigEntry) {
	it.configTouched = true
	it.config.Set(e)
}

// deleteConfig deletes the row of e's key, namespace and destination.
func (it *sideTables) deleteConfig(e *ConfigEntry) {
	if _, ok := it.config.Delete(e); ok {
		it.configTouched = true
	}
}

// configRows returns a copy of every config row in order.
func (it *sideTables) configRows() []ConfigEntry {
	var out []ConfigEntry
	it.config.Scan(func(e *ConfigEntry) bool {
		out = append(out, *e)
		return true
	})
	return out
}

// restoreRow adds a snapshot's config, config_history, requests or
// counters row. An empty id or name is refused, as go-memdb's index
// refused it; a second row of the same key replaces the first, as there.
func (it *sideTables) restoreRow(obj any) error {
	switch r := obj.(type) {
	case *ConfigEntry:
		it.putConfig(r)
	case *HistoryEntry:
		it.putHistory(r)
	case *requestRow:
		if r.ID == "" {
			return fmt.Errorf("raftstore: snapshot requests row without an id")
		}
		it.putRequest(r)
	case *counterRow:
		if r.Name == "" {
			return fmt.Errorf("raftstore: snapshot counters row without a name")
		}
		it.setCounter(r.Name, r.Value)
	default:
		return fmt.Errorf("raftstore: snapshot row %T is not a side table's", obj)
	}
	return nil
}
