package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// dedupModel is request-id dedup as DESIGN.md states it, with the rows
// trimmed at every command entry (what go-memdb did): an id is remembered
// with its first index while that index > (index of the last command entry)
// − window.
type dedupModel struct {
	window uint64
	floor  uint64
	first  map[string]uint64
}

func (m *dedupModel) apply(index uint64, id string) (want uint64) {
	if index > m.window {
		m.floor = max(m.floor, index-m.window)
	}
	if id == "" {
		return index
	}
	if f, ok := m.first[id]; ok && f > m.floor {
		return f
	}
	m.first[id] = index
	return index
}

// remembered is the sorted ids a snapshot must hold.
func (m *dedupModel) remembered() []string {
	var out []string
	for id, f := range m.first {
		if f > m.floor {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// snapshotRequestIDs reads the requests rows of a snapshot stream, in order.
func snapshotRequestIDs(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			T string     `json:"t"`
			R requestRow `json:"r"`
		}
		if json.Unmarshal(sc.Bytes(), &row) == nil && row.T == tableRequests {
			out = append(out, row.R.ID)
		}
	}
	return out
}

// The amortised trimming answers exactly as per-entry trimming did: for
// windows below and above the trim step, with reused ids, failing commands,
// id-less commands, raft configuration entries and batches, every result
// carries the index the model says, every snapshot holds exactly the
// remembered ids, and a replica restored from any of those snapshots goes
// on to the same results and the same bytes.
func TestRequestWindowAmortisedMatchesPerEntry(t *testing.T) {
	for _, window := range []uint64{1, 5, 31, 64, 200} {
		t.Run(fmt.Sprint("window=", window), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(window, 17))
			opts := StateOptions{RequestWindow: window}
			f := newTestFSM(t, opts)
			var replica *FSM // restored from a snapshot of f, then fed the same entries
			m := &dedupModel{window: window, first: map[string]uint64{}}
			index := uint64(0)
			entry := func() (Entry, uint64) {
				index++
				if rng.IntN(20) == 0 {
					return Entry{Index: index}, 0 // a raft configuration change: no trim, no result
				}
				id := ""
				if rng.IntN(8) != 0 {
					id = fmt.Sprintf("req-%d", rng.IntN(int(window)+10))
				}
				key := fmt.Sprintf("k%d", rng.IntN(5))
				if rng.IntN(6) == 0 {
					key = "reject.me" // refused by the validator: only its dedup row is written
				}
				cmd, err := EncodeCommand(MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: key, Value: json.RawMessage(fmt.Sprintf(`{"i":%d}`, index))})
				if err != nil {
					t.Fatal(err)
				}
				return Entry{Index: index, Command: true, Data: EncodeEntry(cmd, id)}, m.apply(index, id)
			}
			for round := range 120 {
				n := 1 + rng.IntN(6)
				logs := make([]Entry, n)
				want := make([]uint64, n)
				for i := range logs {
					logs[i], want[i] = entry()
				}
				var got, gotReplica []*ApplyResult
				if n == 1 && logs[0].Command {
					got = []*ApplyResult{f.Apply(logs[0].Index, logs[0].Data)}
				} else {
					got = f.ApplyBatch(logs)
				}
				if replica != nil {
					gotReplica = replica.ApplyBatch(logs)
				}
				for i, l := range logs {
					if !l.Command {
						continue
					}
					if got[i].Index != want[i] {
						t.Fatalf("round %d, entry %d: result of index %d, want %d (%+v)", round, l.Index, got[i].Index, want[i], got[i])
					}
					if replica != nil {
						a, _ := json.Marshal(got[i])
						b, _ := json.Marshal(gotReplica[i])
						if !bytes.Equal(a, b) {
							t.Fatalf("round %d, entry %d: restored replica answered %s, original %s", round, l.Index, b, a)
						}
					}
				}
				if round%15 != 14 {
					continue
				}
				data := snapshotBytes(t, f)
				if got, want := snapshotRequestIDs(t, data), m.remembered(); !slices.Equal(got, want) {
					t.Fatalf("round %d: snapshot remembers %v, want %v", round, got, want)
				}
				if replica != nil {
					if b := snapshotBytes(t, replica); !bytes.Equal(b, data) {
						t.Fatalf("round %d: the restored replica's snapshot differs:\n%s\n---\n%s", round, b, data)
					}
				}
				replica = newTestFSM(t, opts)
				if err := replica.Restore(bytes.NewReader(data)); err != nil {
					t.Fatal(err)
				}
				if b := snapshotBytes(t, replica); !bytes.Equal(b, data) {
					t.Fatalf("round %d: snapshot of the restored state is not byte-identical", round)
				}
			}
			// Rows are deleted, not only hidden: none at or below the last
			// pass, which is never more than a trim step behind the floor,
			// and both indexes hold the same rows.
			it := f.State().side.Load()
			if it.floor > 0 && it.floor-it.trimmed >= trimStep(window) {
				t.Fatalf("floor %d, last pass %d: a pass is overdue (step %d)", it.floor, it.trimmed, trimStep(window))
			}
			if it.requests.Len() != it.byIndex.Len() {
				t.Fatalf("%d rows by id, %d by index", it.requests.Len(), it.byIndex.Len())
			}
			for _, r := range it.byIndex.Items() {
				if it.trimmed > 0 && r.Index <= it.trimmed {
					t.Fatalf("row %q of index %d outlived the pass at %d", r.ID, r.Index, it.trimmed)
				}
				if got, _ := it.requests.Get(&requestRow{ID: r.ID}); got != r {
					t.Fatalf("row %q: the id index holds another row", r.ID)
				}
			}
		})
	}
}

// Counters keep their rows' semantics: a counter once set stays (even at
// 0), the snapshot writes them in name order, and restore brings them back.
func TestCountersSnapshotAndRestore(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	w := &writer{s: f.State(), txn: f.State().db.Load().Txn(true), tasks: f.State().tasks.Load().clone(), it: f.State().side.Load().clone(), index: 1}
	for _, c := range []struct {
		name string
		v    uint64
	}{{counterPending(3), 2}, {counterHistory, 7}, {counterPending(12), 0}} {
		if err := w.setCounter(c.name, c.v); err != nil {
			t.Fatal(err)
		}
	}
	f.commit(w.txn, w.tasks, w.it)
	f.setApplied(1)
	if got := f.State().TaskBacklog(3); got != 2 {
		t.Fatalf("TaskBacklog(3) = %d, want 2", got)
	}
	data := snapshotBytes(t, f)
	want := `{"t":"counters","r":{"name":"history_len","value":7}}
{"t":"counters","r":{"name":"tasks_pending/12","value":0}}
{"t":"counters","r":{"name":"tasks_pending/3","value":2}}
`
	if !bytes.Contains(data, []byte(want)) {
		t.Fatalf("snapshot counters:\n%s\nwant\n%s", data, want)
	}
	g := newTestFSM(t, StateOptions{})
	if err := g.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if got := g.State().TaskBacklog(3); got != 2 {
		t.Fatalf("restored TaskBacklog(3) = %d, want 2", got)
	}
	if !bytes.Equal(snapshotBytes(t, g), data) {
		t.Fatal("snapshot of the restored counters is not byte-identical")
	}
	for _, bad := range []string{
		`{"t":"requests","r":{"index":3,"result":{}}}`,
		`{"t":"counters","r":{"value":3}}`,
	} {
		if err := g.Restore(bytes.NewReader([]byte(`{"format":"fusebox-raftstore","version":1,"applied":3}` + "\n" + bad))); err == nil {
			t.Fatalf("restore accepted %s", bad)
		}
	}
}

// A config write's result is the entry as json.Marshal writes it, whether
// configEntryJSON writes it by hand or (a value to compact or escape, a
// time out of MarshalJSON's range) json.Marshal does.
func TestConfigEntryJSONMatchesMarshal(t *testing.T) {
	east := time.FixedZone("", 5*3600+30*60)
	entries := []ConfigEntry{
		{Key: "k", Value: json.RawMessage(`{"a":1}`), Index: 1, UpdatedAt: t0},
		{Key: "k\"<é>\u2028&\\", Namespace: "ns", Destination: "d\x01", Value: json.RawMessage(`"xé\u003c"`), Index: 1 << 60, UpdatedAt: t0.In(east).Add(123456789), Author: "a&b"},
		{Key: "k", Value: json.RawMessage(`{ "a" : [1, 2] }`), UpdatedAt: t0},
		{Key: "k", Value: json.RawMessage(`"<b>"`), UpdatedAt: t0},
		{Key: "k", Value: json.RawMessage("\"\u2028\""), UpdatedAt: t0},
		{Key: "k", Value: json.RawMessage(`1`), UpdatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Key: "k", Value: json.RawMessage(`1`), UpdatedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Key: "k", Value: json.RawMessage(`1`), UpdatedAt: t0.In(time.FixedZone("", 24*3600))},
		{Key: "k", Value: json.RawMessage(`1`), UpdatedAt: t0.In(time.FixedZone("", -24*3600+60)), Namespace: "x"},
		{Key: "k", Value: json.RawMessage(`1`), UpdatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{Key: "k", Value: json.RawMessage(`1`), UpdatedAt: time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC)},
	}
	plain := 0
	for i, e := range entries {
		want, werr := json.Marshal(&e)
		if !configEntryPlain(&e) {
			if werr == nil && i < 2 {
				t.Errorf("entry %d: not plain", i)
			}
			continue
		}
		plain++
		if werr != nil {
			t.Fatalf("entry %d: plain, but json.Marshal fails: %v", i, werr)
		}
		if got := (configEntryJSON{&e}).appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("entry %d: appendJSON %s, json.Marshal %s", i, got, want)
		}
	}
	if plain != 5 {
		t.Fatalf("%d entries taken as plain, want 5", plain)
	}
	// Through the FSM: the result is json.Marshal of the stored row.
	f := newTestFSM(t, StateOptions{})
	for i, v := range []string{`{"a":1}`, `{ "a" : 1 }`, `"<&>"`} {
		r := applyCmd(t, f, uint64(i+1), MsgSetConfigValue, SetConfigCommand{CommandMeta: CommandMeta{At: t0.In(east), Author: "z"}, Key: "k", Namespace: "n", Value: json.RawMessage(v)}, "")
		mustOK(t, r)
		e, _ := f.State().ConfigEntry("k", "n", "")
		if want, _ := json.Marshal(&e); !bytes.Equal(r.Value, want) {
			t.Errorf("value %s: result %s, json.Marshal of the row %s", v, r.Value, want)
		}
	}
}

// Config rows keep go-memdb's order (key, namespace, destination joined
// with NUL), in reads and in the snapshot, for keys that prefix each other.
func TestConfigOrderIsTheJoinedKeyOrder(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	refs := [][3]string{{"ab", "", ""}, {"a", "n", ""}, {"a", "", "d"}, {"a", "", ""}, {"a.b", "", ""}, {"a", "n", "d"}, {"a", "nn", ""}, {"a ", "", ""}, {"b", "", ""}}
	for i, r := range refs {
		mustOK(t, applyCmd(t, f, uint64(i+1), MsgSetConfigValue, SetConfigCommand{CommandMeta: meta0, Key: r[0], Namespace: r[1], Destination: r[2], Value: json.RawMessage(`1`)}, ""))
	}
	slices.SortFunc(refs, func(a, b [3]string) int { return bytes.Compare(joinKey(a[:]), joinKey(b[:])) })
	got := f.State().Config()
	if len(got) != len(refs) {
		t.Fatalf("%d rows, want %d", len(got), len(refs))
	}
	for i, e := range got {
		if r := [3]string{e.Key, e.Namespace, e.Destination}; r != refs[i] {
			t.Fatalf("row %d is %q, want %q (joined-key order)", i, r, refs[i])
		}
	}
	g := newTestFSM(t, StateOptions{})
	data := snapshotBytes(t, f)
	if err := g.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, g), data) {
		t.Fatal("restored config re-encodes differently")
	}
}

// Readers of the published side tables (config, history, backlog counters,
// a snapshot's persist) run beside the writer without locks: under -race.
func TestSideTablesReadersBesideWriter(t *testing.T) {
	f := newTestFSM(t, StateOptions{RequestWindow: 64, HistoryLimit: 50})
	st := f.State()
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
				_ = st.Config()
				_, _ = st.ConfigEntry("k3", "", "")
				_ = st.ConfigHistory(5)
				_ = st.TaskBacklog(0)
				if snap, err := f.Snapshot(); err == nil {
					_ = snap.Persist(io.Discard)
				}
			}
		})
	}
	for i := 1; i <= 1500; i++ {
		logs := []Entry{}
		for j := range 4 {
			cmd, err := EncodeCommand(MsgSetConfigValue, SetConfigCommand{CommandMeta: meta0, Key: fmt.Sprintf("k%d", (i+j)%7), Value: json.RawMessage(`1`)})
			if err != nil {
				t.Fatal(err)
			}
			idx := uint64(4*(i-1) + j + 1)
			logs = append(logs, Entry{Index: idx, Command: true, Data: EncodeEntry(cmd, fmt.Sprintf("r%d", idx%100))})
		}
		f.ApplyBatch(logs)
	}
	close(stop)
	wg.Wait()
	if n := len(st.ConfigHistory(0)); n != 50 {
		t.Fatalf("%d history rows, want the limit 50", n)
	}
}

// A restored requests row is remembered until the next command entry moves
// the window past it, whatever its index (as when go-memdb held it).
func TestRestoredRequestRowsStayUntilTheNextCommand(t *testing.T) {
	data := []byte(`{"format":"fusebox-raftstore","version":1,"applied":20}` + "\n" +
		`{"t":"requests","r":{"id":"old","index":0,"result":{}}}` + "\n" +
		`{"t":"requests","r":{"id":"r9","index":9,"result":{"index":9}}}` + "\n")
	f := newTestFSM(t, StateOptions{RequestWindow: 5})
	if err := f.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, f), data) {
		t.Fatalf("restored rows re-encode differently:\n%s", snapshotBytes(t, f))
	}
	r := applyCmd(t, f, 21, MsgSync, struct{}{}, "r9") // floor 16: both forgotten
	if r.Index != 21 {
		t.Fatalf("r9 remembered past its window: %+v", r)
	}
	if got := snapshotRequestIDs(t, snapshotBytes(t, f)); !slices.Equal(got, []string{"r9"}) {
		t.Fatalf("remembered %v, want only the new r9", got)
	}
}

// RequestResult is the answer a retry with the id gets, error included,
// with the index of the entry that gave it, until the window forgets it.
func TestRequestResultIsTheRetrysAnswer(t *testing.T) {
	f := newTestFSM(t, StateOptions{RequestWindow: 5})
	ok := applyCmd(t, f, 1, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "k", Value: json.RawMessage(`{"v":1}`)}, "a")
	mustOK(t, ok)
	bad := applyCmd(t, f, 2, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "reject.me", Value: json.RawMessage(`{"v":1}`)}, "b")
	wantCode(t, bad, CodeInvalidArgument, "key")
	for i, id := range []string{"a", "b"} {
		want := []*ApplyResult{ok, bad}[i]
		got, seen := f.State().RequestResult(id)
		retry := applyCmd(t, f, uint64(3+i), MsgSync, struct{}{}, id)
		if !seen || got.Index != want.Index || !bytes.Equal(got.Value, want.Value) || !reflect.DeepEqual(got.Err, want.Err) ||
			retry.Index != got.Index || !bytes.Equal(retry.Value, got.Value) || !reflect.DeepEqual(retry.Err, got.Err) {
			t.Fatalf("RequestResult(%s) = %+v, %v; the entry answered %+v, its retry %+v", id, got, seen, want, retry)
		}
	}
	if _, seen := f.State().RequestResult("never"); seen {
		t.Fatal("an id never proposed is remembered")
	}
	applyCmd(t, f, 7, MsgSync, struct{}{}, "") // floor 2: a and b forgotten
	if _, seen := f.State().RequestResult("a"); seen {
		t.Fatal("a is remembered past its window")
	}
}
