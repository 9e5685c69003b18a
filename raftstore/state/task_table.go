package state

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/btree"
)

// taskTable is the tasks table: the rows and their indexes as copy-on-write
// B-trees (github.com/tidwall/btree) of *Task, ordered by the rows' own
// fields, so no index keys are built or stored.
//
// Why not go-memdb like the other tables: tasks are the only table written
// per task, twice per task (submit, completion) on every replica, and
// memdb's immutable radix trees made each of those writes copy the path of
// every index plus record each new node in an LRU: 66 % of a replica's apply
// time and a third of a loaded node's allocations (BenchmarkFSMTaskLifecycle,
// TASKS.md "Why not go-memdb").
//
// Versions: the FSM writes into a clone of the published table (O(1): each
// tree is shared and a node is copied the first time a write reaches it) and
// publishes it on commit; a failed batch drops the clone. A published table
// is never written again, so readers use it without locks.
type taskTable struct {
	byID     *btree.BTreeG[*Task] // every row: ID
	due      *btree.BTreeG[*Task] // pending: Shard, NextAttemptAt, ID
	request  *btree.BTreeG[*Task] // with a request id: RequestID, NamespaceID (unique)
	status   *btree.BTreeG[*Task] // failed and dlq (DLQ listing, redrive): Status, ID
	terminal *btree.BTreeG[*Task] // succeeded and failed (collect): CompletedAt, ID

	// pendingBy counts pending rows per destination (namespace and breaker
	// destination); pendingTotal counts every pending row. Both are derived
	// from the rows (rebuilt by restore), so they are identical on every
	// replica; the submit's backlog checks read them in O(log n) (TASKS.md,
	// "Backlog").
	pendingBy    *btree.BTreeG[pendingCount]
	pendingTotal int

	touched bool // written since clone (subscribers are woken on commit)
	// dueShards are the shards a row was put into the due order of since
	// clone (their subscribers are woken on commit: SubscribeShard).
	dueShards map[int]struct{}
	// dueLow is, per shard, the earliest due time of the rows that entered
	// the due order since clone (added, or due time moved; a row rewritten
	// in place is not counted): recorded on commit (due_lows.go).
	dueLow map[int]time.Time

	// hints are the writer's path hints (tidwall/btree PathHint) into the
	// indexes whose writes come in key order: ids are time-ordered, so a
	// submit's rows go to the right edge of byID and a completion looks up,
	// replaces and moves rows submitted together; a batch's terminal rows
	// share its time. A hint that matches costs about two comparisons per
	// level where a search costs six; one that does not narrows the search
	// it falls back to. Only the writer of a clone uses them (clone carries
	// them on); the request index, whose keys are random, and the rare
	// status index search without.
	hintID, hintDue, hintTerminal btree.PathHint
}

func lessTaskID(a, b *Task) bool { return a.ID < b.ID }

func lessTaskDue(a, b *Task) bool {
	if a.Shard != b.Shard {
		return a.Shard < b.Shard
	}
	if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// lessTaskRequest orders the request index by request id, then namespace.
// The index is only ever searched for one (namespace, request id), never
// walked in order, so any total order serves; this one decides most
// comparisons on the request id. Namespace first compared two equal
// namespace strings byte by byte at every step of every search (a node's
// tasks are mostly of a few namespaces): the index's comparisons were the
// largest share of a loaded replica's B-tree searches.
func lessTaskRequest(a, b *Task) bool {
	if c := strings.Compare(a.RequestID, b.RequestID); c != 0 {
		return c < 0
	}
	return a.NamespaceID < b.NamespaceID
}

func lessTaskStatus(a, b *Task) bool {
	if a.Status != b.Status {
		return a.Status < b.Status
	}
	return a.ID < b.ID
}

func lessTaskTerminal(a, b *Task) bool {
	if c := a.CompletedAt.Compare(b.CompletedAt); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// Index membership: a row is in an index only when the index needs it, so
// the common rows (pending, succeeded) cost the fewest tree writes.
func inDue(t *Task) bool      { return t.Status == TaskPending }
func inRequest(t *Task) bool  { return t.RequestID != "" }
func inTerminal(t *Task) bool { return t.Status == TaskSucceeded || t.Status == TaskFailed }

// statusIndexed reports whether tasks of status are in the status index.
func statusIndexed(status string) bool { return status == TaskDLQ || status == TaskFailed }
func inStatus(t *Task) bool            { return statusIndexed(t.Status) }

func newTaskTable() *taskTable {
	opts := btree.Options{NoLocks: true} // one writer; published versions are read-only
	return &taskTable{
		byID:     btree.NewBTreeGOptions(lessTaskID, opts),
		due:      btree.NewBTreeGOptions(lessTaskDue, opts),
		request:  btree.NewBTreeGOptions(lessTaskRequest, opts),
		status:   btree.NewBTreeGOptions(lessTaskStatus, opts),
		terminal: btree.NewBTreeGOptions(lessTaskTerminal, opts),

		pendingBy: btree.NewBTreeGOptions(lessPending, opts),
	}
}

// clone returns a writable version sharing every node with tt. It must be
// called by the only writer: it marks tt's trees so that tt stays as it is.
func (tt *taskTable) clone() *taskTable {
	return &taskTable{
		byID: tt.byID.Copy(), due: tt.due.Copy(), request: tt.request.Copy(),
		status: tt.status.Copy(), terminal: tt.terminal.Copy(),
		pendingBy: tt.pendingBy.Copy(), pendingTotal: tt.pendingTotal,
		hintID: tt.hintID, hintDue: tt.hintDue, hintTerminal: tt.hintTerminal,
	}
}

// get returns the row with id, or nil.
func (tt *taskTable) get(id string) *Task { return tt.findID(id, nil) }

// lookup is get for the table's writer (the FSM, on its clone): it
// searches with the writer's path hint (hintID).
func (tt *taskTable) lookup(id string) *Task { return tt.findID(id, &tt.hintID) }

// findID searches byID for id, with hint when it is not nil.
func (tt *taskTable) findID(id string, hint *btree.PathHint) *Task {
	p := takePivot()
	p.ID = id
	t, _ := tt.byID.GetHint(p, hint)
	putPivot(p)
	return t
}

// byRequest returns the row submitted with (namespace, requestID), or nil.
func (tt *taskTable) byRequest(namespace, requestID string) *Task {
	p := takePivot()
	p.NamespaceID, p.RequestID = namespace, requestID
	t, _ := tt.request.Get(p)
	putPivot(p)
	return t
}

// pivots are the search keys of the table's lookups (get, byRequest,
// ascendDue, the writer's lookup), which may run beside each other. A *Task
// built per lookup escapes into the trees' less functions: a 384-byte
// allocation per read, twice per task on every replica for the writer, per
// task in a poll over tasks and per wake-up of a shard's reader. A user
// sets the key fields it needs; putPivot clears them.
var pivots = sync.Pool{New: func() any { return new(Task) }}

func takePivot() *Task { return pivots.Get().(*Task) }

func putPivot(p *Task) {
	*p = Task{}
	pivots.Put(p)
}

// put stores t, replacing old (nil for a new row; old.ID == t.ID). Rows are
// immutable once stored: a change is a new row put over the old one.
func (tt *taskTable) put(old, t *Task) {
	tt.touched = true
	if inDue(t) {
		if tt.dueShards == nil {
			tt.dueShards = make(map[int]struct{}, 4)
		}
		tt.dueShards[t.Shard] = struct{}{}
		if old == nil || !inDue(old) || !old.NextAttemptAt.Equal(t.NextAttemptAt) {
			if cur, ok := tt.dueLow[t.Shard]; !ok || t.NextAttemptAt.Before(cur) {
				if tt.dueLow == nil {
					tt.dueLow = make(map[int]time.Time, 4)
				}
				tt.dueLow[t.Shard] = t.NextAttemptAt
			}
		}
	}
	tt.byID.SetHint(t, &tt.hintID)
	tt.reindex(old, t)
}

// restore adds a row read from a snapshot, refusing what no apply could
// have written: a second row with the same id or the same request id.
func (tt *taskTable) restore(t *Task) error {
	if t.ID == "" {
		return fmt.Errorf("raftstore: snapshot tasks row without an id")
	}
	if tt.lookup(t.ID) != nil {
		return fmt.Errorf("raftstore: snapshot has task %q twice", t.ID)
	}
	if inRequest(t) && tt.byRequest(t.NamespaceID, t.RequestID) != nil {
		return fmt.Errorf("raftstore: snapshot has request id %q of namespace %q twice", t.RequestID, t.NamespaceID)
	}
	tt.put(nil, t)
	return nil
}

// remove deletes the row t.
func (tt *taskTable) remove(t *Task) {
	tt.touched = true
	tt.byID.DeleteHint(t, &tt.hintID)
	tt.reindex(t, nil)
}

// reindex moves the secondary indexes from old to t (either may be nil).
func (tt *taskTable) reindex(old, t *Task) {
	reindex(tt.due, inDue, lessTaskDue, old, t, &tt.hintDue)
	reindex(tt.request, inRequest, lessTaskRequest, old, t, nil)
	reindex(tt.status, inStatus, lessTaskStatus, old, t, nil)
	reindex(tt.terminal, inTerminal, lessTaskTerminal, old, t, &tt.hintTerminal)
	// A row's namespace and destination never change: only entering or
	// leaving pending moves the counts.
	oldIn, newIn := old != nil && inDue(old), t != nil && inDue(t)
	switch {
	case oldIn && !newIn:
		tt.addPending(old, -1)
	case newIn && !oldIn:
		tt.addPending(t, 1)
	}
}

// pendingCount is one destination's pending rows (pendingBy's item). Its
// strings are those of the row that last set it: keyed by the pair, not a
// joined string, a count moves without allocating.
type pendingCount struct {
	namespace, destination string
	n                      int
}

func lessPending(a, b pendingCount) bool {
	if a.namespace != b.namespace {
		return a.namespace < b.namespace
	}
	return a.destination < b.destination
}

// addPending moves t's destination count and the total by d.
func (tt *taskTable) addPending(t *Task, d int) {
	k := pendingCount{namespace: t.NamespaceID, destination: t.destination()}
	if c, ok := tt.pendingBy.Get(k); ok {
		k.n = c.n
	}
	if k.n += d; k.n <= 0 {
		tt.pendingBy.Delete(k)
	} else {
		tt.pendingBy.Set(k)
	}
	tt.pendingTotal += d
}

// destinationBacklog is the number of pending tasks of namespace for
// destination (a breaker destination: Task.destination).
func (tt *taskTable) destinationBacklog(namespace, destination string) int {
	c, _ := tt.pendingBy.Get(pendingCount{namespace: namespace, destination: destination})
	return c.n
}

// reindex moves one index from old to t (either may be nil). An entry whose
// key did not change is replaced in place by Set, one tree write. hint, when
// not nil, is the writer's path hint into tr.
func reindex(tr *btree.BTreeG[*Task], in func(*Task) bool, less func(a, b *Task) bool, old, t *Task, hint *btree.PathHint) {
	oldIn, newIn := old != nil && in(old), t != nil && in(t)
	if oldIn && (!newIn || less(old, t) || less(t, old)) {
		tr.DeleteHint(old, hint)
	}
	if newIn {
		tr.SetHint(t, hint)
	}
}

// ascend calls fn for the rows of tr from pivot (nil: the first) in order
// until fn returns false.
func ascend(tr *btree.BTreeG[*Task], pivot *Task, fn func(*Task) bool) {
	if pivot == nil {
		tr.Scan(fn)
		return
	}
	tr.Ascend(pivot, fn)
}

// ascendDue calls fn for the rows of the due index tr from (shard, at) —
// before every row of the shard due at or after at — in order until fn
// returns false.
func ascendDue(tr *btree.BTreeG[*Task], shard int, at time.Time, fn func(*Task) bool) {
	p := takePivot()
	p.Shard, p.NextAttemptAt = shard, at
	tr.Ascend(p, fn)
	putPivot(p)
}
