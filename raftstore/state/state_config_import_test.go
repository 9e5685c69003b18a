package state

import (
	"encoding/json"
	"testing"
	"time"
)

func TestImportConfigReplacesKeysAtomically(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	set := func(idx uint64, key, ns, v string) {
		mustOK(t, applyCmd(t, f, idx, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: key, Namespace: ns, Value: json.RawMessage(v)}, ""))
	}
	set(1, "a", "", `{"v":1}`)
	set(2, "a", "ns1", `{"v":2}`) // not in the file: deleted
	set(3, "b", "", `{"v":3}`)    // key not imported: untouched
	set(4, "c", "ns1", `{"v":4}`) // equal in the file: unchanged, keeps its index
	cmd := ImportConfigCommand{CommandMeta: CommandMeta{At: t0.Add(time.Hour), Author: "ops"},
		Keys: []string{"a", "c", "d"},
		Entries: []ConfigEntry{
			{Key: "a", Value: json.RawMessage(`{"v":10}`)},
			{Key: "c", Namespace: "ns1", Value: json.RawMessage(`{"v":4}`)},
			{Key: "d", Destination: "ep", Value: json.RawMessage(`{"v":5}`)},
		}}
	// The dry run's plan is what the apply does.
	plan := PlanConfigImport(st.Config(), cmd)
	r := applyCmd(t, f, 5, MsgImportConfig, cmd, "")
	mustOK(t, r)
	var got ImportOutcome
	if err := json.Unmarshal(r.Value, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Set) != 2 || got.Set[0].Key != "a" || got.Set[1].Key != "d" || got.Set[0].Index != 5 ||
		len(got.Deleted) != 1 || got.Deleted[0] != (ConfigRef{Key: "a", Namespace: "ns1"}) || got.Unchanged != 1 {
		t.Fatalf("outcome = %+v", got)
	}
	if len(plan.Set) != len(got.Set) || len(plan.Deleted) != len(got.Deleted) || plan.Unchanged != got.Unchanged {
		t.Fatalf("plan %+v differs from the applied outcome %+v", plan, got)
	}
	want := map[ConfigRef]struct {
		v     string
		index uint64
	}{
		{Key: "a"}:                    {`{"v":10}`, 5},
		{Key: "b"}:                    {`{"v":3}`, 3},
		{Key: "c", Namespace: "ns1"}:  {`{"v":4}`, 4},
		{Key: "d", Destination: "ep"}: {`{"v":5}`, 5},
	}
	entries := st.Config()
	if len(entries) != len(want) {
		t.Fatalf("config = %+v", entries)
	}
	for _, e := range entries {
		w, ok := want[ConfigRef{e.Key, e.Namespace, e.Destination}]
		if !ok || string(e.Value) != w.v || e.Index != w.index {
			t.Errorf("entry %+v, want %+v", e, w)
		}
	}
	h := st.ConfigHistory(1)
	if len(h) != 1 || h[0].Op != OpImport || h[0].Index != 5 || h[0].Author != "ops" {
		t.Fatalf("history = %+v", h)
	}

	// Malformed commands are refused whole and write nothing.
	for _, c := range []struct {
		cmd   ImportConfigCommand
		field string
	}{
		{ImportConfigCommand{CommandMeta: meta0}, "keys"},
		{ImportConfigCommand{CommandMeta: meta0, Keys: []string{"a", "a"}}, "keys[1]"},
		{ImportConfigCommand{CommandMeta: meta0, Keys: []string{"a"}, Entries: []ConfigEntry{{Key: "b", Value: json.RawMessage(`1`)}}}, "entries[0].key"},
		{ImportConfigCommand{CommandMeta: meta0, Keys: []string{"a"}, Entries: []ConfigEntry{{Key: "a"}}}, "entries[0].value"},
		{ImportConfigCommand{CommandMeta: meta0, Keys: []string{"a"}, Entries: []ConfigEntry{{Key: "a", Value: json.RawMessage(`1`)}, {Key: "a", Value: json.RawMessage(`2`)}}}, "entries[1].key"},
		{ImportConfigCommand{CommandMeta: meta0, Keys: []string{"a"}, Entries: []ConfigEntry{{Key: "a", Namespace: "x\n", Value: json.RawMessage(`1`)}}}, "entries[0].namespace"},
	} {
		wantCode(t, applyCmd(t, f, 6, MsgImportConfig, c.cmd, ""), CodeInvalidArgument, c.field)
	}
	if len(st.Config()) != len(want) {
		t.Fatal("a refused import wrote something")
	}
}
