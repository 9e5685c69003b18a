package state

import (
	"fmt"

	"github.com/tidwall/btree"
)

// internalTables holds the two internal tables, requests (dedup) and
// counters, as copy-on-write B-trees (github.com/tidwall/btree) versioned
// like the task table: the FSM writes into a clone of the published value
// and publishes it on commit; a published value is never written again.
//
// Why not go-memdb (where they were): every command entry wrote a dedup row
// and trimmed one, and every task command and config change rewrote a
// counter row; each such memdb write copies the radix path of every index of
// its table. Under BenchmarkRaftWrite (64 writers, one entry per call) those
// writes and the garbage they left were most of the FSM's time, on every
// replica. Here a dedup row is two tree writes (by id, by index) that copy a
// node only the first time a batch reaches it, a counter one.
//
// Forgetting request ids (RequestWindow) is by index only, as before, but
// amortised: floor is the index at or below which a row is forgotten (a
// lookup skips it, a snapshot leaves it out), and the rows are deleted in
// one pass once floor has moved trimStep past the last pass. The visible
// state — what a lookup answers, what a snapshot holds — is therefore
// exactly what per-entry trimming gave, on every replica.
type internalTables struct {
	requests *btree.BTreeG[*requestRow] // by ID (unique): dedup lookups, snapshot order
	byIndex  *btree.BTreeG[*requestRow] // by Index, ID: trimming, oldest first
	counters *btree.Map[string, uint64] // name → value, snapshot order by name

	floor   uint64 // rows with Index <= floor are forgotten
	trimmed uint64 // floor of the last deleting pass

	pivot requestRow // the writer's search key (see taskTable.pivot)
}

func lessRequestID(a, b *requestRow) bool { return a.ID < b.ID }

func lessRequestIndex(a, b *requestRow) bool {
	if a.Index != b.Index {
		return a.Index < b.Index
	}
	return a.ID < b.ID
}

func newInternalTables() *internalTables {
	opts := btree.Options{NoLocks: true} // one writer; published versions are read-only
	return &internalTables{
		requests: btree.NewBTreeGOptions(lessRequestID, opts),
		byIndex:  btree.NewBTreeGOptions(lessRequestIndex, opts),
		counters: btree.NewMap[string, uint64](0),
	}
}

// clone returns a writable version sharing every node with it. Only the
// writer may call it.
func (it *internalTables) clone() *internalTables {
	return &internalTables{
		requests: it.requests.Copy(), byIndex: it.byIndex.Copy(), counters: it.counters.Copy(),
		floor: it.floor, trimmed: it.trimmed,
	}
}

// trimStep bounds how far floor runs ahead of the deleted rows: a deleting
// pass every window/32 indexes (at least 1), so at most 1/32 more rows are
// held than are remembered.
func trimStep(window uint64) uint64 { return max(window/32, 1) }

// forget moves floor to index − window (for the command entry at index) and,
// every trimStep, deletes the rows at or below it.
func (it *internalTables) forget(index, window uint64) {
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

// request returns the remembered result of id, or nil (never seen, or
// forgotten). Writer only (it uses pivot).
func (it *internalTables) request(id string) *requestRow {
	it.pivot.ID = id
	r, ok := it.requests.Get(&it.pivot)
	it.pivot.ID = ""
	if !ok || r.Index <= it.floor {
		return nil
	}
	return r
}

// putRequest remembers r, replacing a row of the same id (a forgotten one
// not yet deleted, or a snapshot's duplicate, where the last row won in
// go-memdb too).
func (it *internalTables) putRequest(r *requestRow) {
	if old, ok := it.requests.Set(r); ok {
		it.byIndex.Delete(old)
	}
	it.byIndex.Set(r)
}

// counter returns a counter's value, 0 if it was never set.
func (it *internalTables) counter(name string) uint64 {
	v, _ := it.counters.Get(name)
	return v
}

// setCounter sets a counter; a counter once set stays (even at 0), as its
// row did.
func (it *internalTables) setCounter(name string, v uint64) { it.counters.Set(name, v) }

// scanRequests calls fn for every remembered row in id order (the
// snapshot's order) until fn returns false.
func (it *internalTables) scanRequests(fn func(*requestRow) bool) {
	it.requests.Scan(func(r *requestRow) bool {
		if r.Index <= it.floor {
			return true
		}
		return fn(r)
	})
}

// scanCounters calls fn for every counter in name order until fn returns
// false.
func (it *internalTables) scanCounters(fn func(*counterRow) bool) {
	it.counters.Scan(func(name string, v uint64) bool {
		return fn(&counterRow{Name: name, Value: v})
	})
}

// restoreRow adds a snapshot's requests or counters row. An empty id or
// name is refused, as go-memdb's index refused it.
func (it *internalTables) restoreRow(obj any) error {
	switch r := obj.(type) {
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
		return fmt.Errorf("raftstore: snapshot row %T is not an internal table's", obj)
	}
	return nil
}
