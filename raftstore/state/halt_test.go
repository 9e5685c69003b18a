package state

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func wantHalted(t *testing.T, f *FSM, index uint64, parts ...string) {
	t.Helper()
	select {
	case <-f.Halted():
	default:
		t.Fatal("FSM not halted")
	}
	he := f.HaltErr()
	if he == nil || he.Index != index {
		t.Fatalf("halt = %+v, want at index %d", he, index)
	}
	for _, p := range parts {
		if !strings.Contains(he.Error(), p) {
			t.Fatalf("halt message %q lacks %q", he.Error(), p)
		}
	}
}

func TestUnknownTypeHaltsTheFSM(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	mustOK(t, applyCmd(t, f, 1, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "a", Value: json.RawMessage(`{}`)}, ""))
	r := f.Apply(2, EncodeEntry([]byte{100, '{', '}'}, "req-2"))
	if r.Err == nil || r.Err.Code != CodeInternal {
		t.Fatalf("result = %+v", r)
	}
	wantHalted(t, f, 2, "raft index 2", "command type 100", "entry version 1", fmt.Sprintf("log version %d", LogVersion))
	// Nothing more is applied, and the applied index stays where it stopped.
	r = applyCmd(t, f, 3, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "b", Value: json.RawMessage(`{}`)}, "")
	if r.Err == nil {
		t.Fatal("an entry after the halt was applied")
	}
	if _, ok := f.State().ConfigEntry("b", "", ""); ok || f.AppliedIndex() != 1 {
		t.Fatalf("applied index %d, entry b written %v", f.AppliedIndex(), ok)
	}
	// No snapshot may claim entries the state never applied.
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("snapshot of a halted FSM")
	}
}

func TestUnknownEntryVersionHaltsTheFSM(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	f.Apply(7, []byte{99, 0, byte(MsgSync)})
	wantHalted(t, f, 7, "entry version 99")
}

// A type newer than the FSM's log version halts it like an unknown one: a
// node built at log version 1 cannot apply set_config_value.
func TestNewerTypeHaltsAnOlderLogVersion(t *testing.T) {
	old := newTestFSM(t, StateOptions{LogVersion: LogVersionBase})
	cur := newTestFSM(t, StateOptions{})
	c := SetConfigCommand{CommandMeta: meta0, Key: "a", Value: json.RawMessage(`{"x":1}`)}
	mustOK(t, applyCmd(t, cur, 1, MsgSetConfigValue, c, ""))
	applyCmd(t, old, 1, MsgSetConfigValue, c, "")
	wantHalted(t, old, 1, "command type 32 (set_config_value", "log version 1")
}

func TestIgnorableUnknownTypeIsSkipped(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	typ := IgnorableFlag | 5
	r := f.Apply(1, EncodeEntry([]byte{byte(typ), '{', '}'}, "req-1"))
	mustOK(t, r)
	if f.HaltErr() != nil || f.AppliedIndex() != 1 {
		t.Fatalf("halt %v, applied %d", f.HaltErr(), f.AppliedIndex())
	}
	// Its request id is remembered like any other.
	if r := f.State().side.Load().clone().request("req-1"); r == nil || r.Index != 1 {
		t.Fatalf("request id req-1 not remembered: %+v", r)
	}
	mustOK(t, applyCmd(t, f, 2, MsgSync, struct{}{}, ""))
}

// A batch stops exactly at the unknown entry: the entries before it are
// applied, the ones after it are not.
func TestApplyBatchStopsAtTheHalt(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	entry := func(i uint64, key string) Entry {
		cmd, _ := EncodeCommand(MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: key, Value: json.RawMessage(`{}`)})
		return Entry{Index: i, Command: true, Data: EncodeEntry(cmd, "")}
	}
	logs := []Entry{entry(1, "a"), entry(2, "b"),
		{Index: 3, Command: true, Data: EncodeEntry([]byte{77, '{', '}'}, "")}, entry(4, "d")}
	out := f.ApplyBatch(logs)
	wantHalted(t, f, 3, "command type 77")
	if f.AppliedIndex() != 2 {
		t.Fatalf("applied index = %d", f.AppliedIndex())
	}
	for i, key := range []string{"a", "b", "", "d"} {
		_, ok := f.State().ConfigEntry(key, "", "")
		if want := i < 2; key != "" && ok != want {
			t.Fatalf("entry %q written = %v", key, ok)
		}
		if r := out[i]; (r.Err == nil) != (i < 2) {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
}
