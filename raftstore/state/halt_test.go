package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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

// A wait for an index the halt keeps from ever being applied ends at the
// halt with the *HaltError, not at its deadline; a wait for an entry before
// the halt, in the halting batch, still sees it applied. OnHalt runs once.
func TestWaitForAppliedEndsAtTheHalt(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	var halts []*HaltError
	f.OnHalt(func(he *HaltError) { halts = append(halts, he) })
	set := func(i uint64, key string) Entry {
		cmd, _ := EncodeCommand(MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: key, Value: json.RawMessage(`{}`)})
		return Entry{Index: i, Command: true, Data: EncodeEntry(cmd, "")}
	}
	f.ApplyBatch([]Entry{set(1, "a")})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waits := map[uint64]chan error{}
	for _, i := range []uint64{1, 2, 3, 9} {
		ch := make(chan error, 1)
		waits[i] = ch
		go func() { ch <- f.WaitForApplied(ctx, i) }()
	}
	f.ApplyBatch([]Entry{set(2, "b"), {Index: 3, Command: true, Data: EncodeEntry([]byte{77, '{', '}'}, "")}, set(4, "c")})
	wantHalted(t, f, 3, "command type 77")
	for _, i := range []uint64{1, 2} {
		if err := <-waits[i]; err != nil {
			t.Fatalf("wait for %d (before the halt) = %v", i, err)
		}
	}
	for _, i := range []uint64{3, 9} {
		var he *HaltError
		if err := <-waits[i]; !errors.As(err, &he) || he.Index != 3 {
			t.Fatalf("wait for %d (at or past the halt) = %v, want the halt at 3", i, err)
		}
	}
	if err := f.WaitForApplied(ctx, 4); !errors.As(err, new(*HaltError)) {
		t.Fatalf("a wait begun after the halt = %v", err)
	}
	f.Apply(5, EncodeEntry([]byte{78, '{', '}'}, ""))
	if len(halts) != 1 || halts[0].Index != 3 {
		t.Fatalf("OnHalt ran with %+v, want once, at 3", halts)
	}

	// WaitForAppliedOr also ends when its abort is closed, with the cause.
	g := newTestFSM(t, StateOptions{})
	abort := make(chan struct{})
	close(abort)
	cause := errors.New("the log store failed")
	if err := g.WaitForAppliedOr(ctx, 1, abort, func() error { return cause }); !errors.Is(err, cause) {
		t.Fatalf("aborted wait = %v", err)
	}
}
