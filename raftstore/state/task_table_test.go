package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/btree"
)

// rows returns tr's rows in order.
func rows(tr *btree.BTreeG[*Task]) []*Task {
	var out []*Task
	tr.Scan(func(t *Task) bool { out = append(out, t); return true })
	return out
}

// checkIndexes compares every index of tt with what a plain map of the
// rows says it must hold, in order.
func checkIndexes(t *testing.T, tt *taskTable, model map[string]*Task) {
	t.Helper()
	all := make([]*Task, 0, len(model))
	for _, r := range model {
		all = append(all, r)
	}
	for _, ix := range []struct {
		name string
		tr   *btree.BTreeG[*Task]
		in   func(*Task) bool
		less func(a, b *Task) bool
	}{
		{"id", tt.byID, func(*Task) bool { return true }, lessTaskID},
		{"due", tt.due, inDue, lessTaskDue},
		{"request", tt.request, inRequest, lessTaskRequest},
		{"status", tt.status, inStatus, lessTaskStatus},
		{"terminal", tt.terminal, inTerminal, lessTaskTerminal},
	} {
		var want []*Task
		for _, r := range all {
			if ix.in(r) {
				want = append(want, r)
			}
		}
		slices.SortFunc(want, func(a, b *Task) int {
			if ix.less(a, b) {
				return -1
			}
			if ix.less(b, a) {
				return 1
			}
			return 0
		})
		if got := rows(ix.tr); !slices.Equal(got, want) {
			t.Fatalf("%s index: %d rows, want %d (%v vs %v)", ix.name, len(got), len(want), ids(got), ids(want))
		}
	}
}

func ids(ts []*Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// A random history of inserts, status changes, reschedules and removals,
// committed or dropped in random batches, leaves every index exactly as a
// plain model of the rows says; dropped batches leave no trace; and every
// published version reads the same after later writes as when it was
// published.
func TestTaskTableMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	statuses := []string{TaskPending, TaskPending, TaskSucceeded, TaskFailed, TaskDLQ}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pub := newTaskTable()
	model := map[string]*Task{}
	type version struct {
		tt   *taskTable
		want map[string][]*Task
	}
	var versions []version
	snapshot := func(tt *taskTable) map[string][]*Task {
		return map[string][]*Task{"id": rows(tt.byID), "due": rows(tt.due), "request": rows(tt.request),
			"status": rows(tt.status), "terminal": rows(tt.terminal)}
	}
	next := 0
	for batch := range 400 {
		w := pub.clone()
		m := maps(model)
		for range 1 + rng.IntN(20) {
			switch op := rng.IntN(10); {
			case op < 4 || len(m) == 0: // insert
				next++
				r := &Task{ID: fmt.Sprintf("%08d", rng.IntN(1_000_000)*100+next%100), Shard: rng.IntN(4), NamespaceID: "ns",
					Status: TaskPending, NextAttemptAt: base.Add(time.Duration(rng.IntN(50)) * time.Second)}
				if rng.IntN(3) == 0 {
					r.RequestID = fmt.Sprint("req-", next)
				}
				if m[r.ID] != nil {
					continue
				}
				w.put(nil, r)
				m[r.ID] = r
			case op < 9: // change status / reschedule / complete
				old := pick(rng, m)
				r := *old
				r.Status = statuses[rng.IntN(len(statuses))]
				r.NextAttemptAt = base.Add(time.Duration(rng.IntN(50)) * time.Second)
				r.CompletedAt = base.Add(time.Duration(rng.IntN(50)) * time.Second)
				w.put(old, &r)
				m[r.ID] = &r
			default: // remove
				old := pick(rng, m)
				w.remove(old)
				delete(m, old.ID)
			}
		}
		if rng.IntN(4) == 0 {
			continue // dropped: pub and model unchanged
		}
		pub, model = w, m
		checkIndexes(t, pub, model)
		if batch%40 == 0 {
			versions = append(versions, version{pub, snapshot(pub)})
		}
	}
	for i, v := range versions {
		for name, want := range snapshot(v.tt) {
			if !slices.Equal(want, v.want[name]) {
				t.Fatalf("version %d: index %s changed after it was published", i, name)
			}
		}
	}
}

func maps(m map[string]*Task) map[string]*Task {
	out := make(map[string]*Task, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func pick(rng *rand.Rand, m map[string]*Task) *Task {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return m[keys[rng.IntN(len(keys))]]
}

// Readers walk published versions while the single writer clones, writes
// and publishes (run under -race: clone marks the published trees, which
// readers must never notice).
func TestTaskTableReadersBesideWriter(t *testing.T) {
	var cur atomic.Pointer[taskTable]
	cur.Store(newTaskTable())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tt := cur.Load()
				n := 0
				ascendDue(tt.due, 1, time.Time{}, func(r *Task) bool { n++; return r.Shard == 1 })
				tt.byID.Scan(func(*Task) bool { return true })
				_ = tt.get("00000010")
			}
		})
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3000 {
		w := cur.Load().clone()
		r := &Task{ID: fmt.Sprintf("%08d", i), Shard: i % 4, Status: TaskPending, NextAttemptAt: base.Add(time.Duration(i) * time.Millisecond)}
		w.put(nil, r)
		if i >= 10 {
			old := w.get(fmt.Sprintf("%08d", i-10))
			done := *old
			done.Status, done.CompletedAt = TaskSucceeded, base
			w.put(old, &done)
		}
		cur.Store(w)
	}
	close(stop)
	wg.Wait()
	if n := cur.Load().byID.Len(); n != 3000 {
		t.Fatalf("%d rows, want 3000", n)
	}
}

// Lookups, the readers' and the writer's, take their search key from a pool: a key built per
// lookup was a 384-byte allocation per read (testing.AllocsPerRun rounds
// down, so the race detector's dropping of pooled keys does not count).
func TestTaskTableReadsTakePooledKeys(t *testing.T) {
	tt := newTaskTable()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		tt.put(nil, &Task{ID: fmt.Sprintf("%08d", i), Shard: i % 4, Status: TaskPending, NextAttemptAt: base.Add(time.Duration(i)),
			NamespaceID: "ns", RequestID: fmt.Sprintf("r%d", i)})
	}
	var got *Task
	n := 0
	for name, read := range map[string]func(){
		"get":       func() { got = tt.get("00000042") },
		"lookup":    func() { got = tt.lookup("00000042") },
		"byRequest": func() { got = tt.byRequest("ns", "r42") },
		"ascendDue": func() { ascendDue(tt.due, 2, base, func(*Task) bool { n++; return false }) },
	} {
		if a := testing.AllocsPerRun(200, read); a != 0 {
			t.Errorf("%s: %v allocations per read, want 0", name, a)
		}
	}
	if got == nil || got.ID != "00000042" || n == 0 {
		t.Fatalf("the reads found %+v and %d due rows", got, n)
	}
}
