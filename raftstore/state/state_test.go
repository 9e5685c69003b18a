package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

var meta0 = CommandMeta{At: t0, Author: "alice"}

// fakeValidator rejects the key "reject.me" and values that are not JSON
// objects, and canonicalizes by compacting.
type fakeValidator struct{}

func (fakeValidator) Validate(key, _, _ string, value json.RawMessage) (json.RawMessage, error) {
	if key == "reject.me" {
		return nil, &Error{Code: CodeInvalidArgument, Field: "key", Message: "rejected by validator"}
	}
	if !bytes.HasPrefix(bytes.TrimSpace(value), []byte("{")) {
		return nil, errors.New("value must be an object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, value); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func newTestFSM(t *testing.T, opts StateOptions) *FSM {
	t.Helper()
	if opts.Validator == nil {
		opts.Validator = fakeValidator{}
	}
	st, err := NewState(opts)
	if err != nil {
		t.Fatal(err)
	}
	return NewFSM(st, nil)
}

func applyCmd(t *testing.T, f *FSM, index uint64, typ MessageType, payload any, reqID string) *ApplyResult {
	t.Helper()
	cmd, err := EncodeCommand(typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(index, EncodeEntry(cmd, reqID))
}

func mustOK(t *testing.T, r *ApplyResult) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("unexpected error: %v", r.Err)
	}
}

func wantCode(t *testing.T, r *ApplyResult, code, field string) {
	t.Helper()
	if r.Err == nil || r.Err.Code != code || (field != "" && r.Err.Field != field) {
		t.Fatalf("want %s on %q, got %+v", code, field, r.Err)
	}
}

func TestConfigSetDeleteAndHistory(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	r := applyCmd(t, f, 10, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "breaker.timeout", Namespace: "ns1", Value: json.RawMessage(`{ "v" : 1 }`)}, "")
	mustOK(t, r)
	e, ok := st.ConfigEntry("breaker.timeout", "ns1", "")
	if !ok {
		t.Fatal("entry not found")
	}
	if string(e.Value) != `{"v":1}` || e.Index != 10 || !e.UpdatedAt.Equal(t0) || e.Author != "alice" {
		t.Fatalf("entry = %+v", e)
	}
	var got ConfigEntry
	if err := json.Unmarshal(r.Value, &got); err != nil || got.Index != 10 {
		t.Fatalf("result value %s: %v", r.Value, err)
	}
	// The global and namespaced entries are distinct rows.
	mustOK(t, applyCmd(t, f, 11, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "breaker.timeout", Value: json.RawMessage(`{}`)}, ""))
	if n := len(st.Config()); n != 2 {
		t.Fatalf("want 2 entries, got %d", n)
	}
	mustOK(t, applyCmd(t, f, 12, MsgDeleteConfig, DeleteConfigCommand{CommandMeta: meta0, Key: "breaker.timeout", Namespace: "ns1"}, ""))
	if _, ok := st.ConfigEntry("breaker.timeout", "ns1", ""); ok {
		t.Fatal("entry not deleted")
	}
	wantCode(t, applyCmd(t, f, 13, MsgDeleteConfig, DeleteConfigCommand{CommandMeta: meta0, Key: "breaker.timeout", Namespace: "ns1"}, ""), CodeNotFound, "")

	h := st.ConfigHistory(0)
	if len(h) != 3 || h[0].Op != OpDelete || h[0].Index != 12 || h[2].Op != OpSet || string(h[2].Value) != `{"v":1}` {
		t.Fatalf("history = %+v", h)
	}
	if h := st.ConfigHistory(1); len(h) != 1 || h[0].Index != 12 {
		t.Fatalf("limited history = %+v", h)
	}
}

func TestConfigValidationWritesNothing(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	wake, cancel := st.Subscribe(TableConfig)
	defer cancel()
	cases := []struct {
		name  string
		cmd   SetConfigCommand
		field string
	}{
		{"validator rejects key", SetConfigCommand{CommandMeta: meta0, Key: "reject.me", Value: json.RawMessage(`{}`)}, "key"},
		{"validator rejects value", SetConfigCommand{CommandMeta: meta0, Key: "k", Value: json.RawMessage(`[1]`)}, "value"},
		{"null value", SetConfigCommand{CommandMeta: meta0, Key: "k"}, "value"},
		{"empty key", SetConfigCommand{CommandMeta: meta0, Value: json.RawMessage(`{}`)}, "key"},
		{"control chars", SetConfigCommand{CommandMeta: meta0, Key: "a\x00b", Value: json.RawMessage(`{}`)}, "key"},
		{"no timestamp", SetConfigCommand{Key: "k", Value: json.RawMessage(`{}`)}, "at"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantCode(t, applyCmd(t, f, uint64(i+1), MsgSetConfig, c.cmd, ""), CodeInvalidArgument, c.field)
		})
	}
	if len(st.Config()) != 0 || len(st.ConfigHistory(0)) != 0 {
		t.Fatalf("rejected writes left rows: %v %v", st.Config(), st.ConfigHistory(0))
	}
	select {
	case <-wake:
		t.Fatal("subscriber woken by rejected writes")
	default:
	}
}

func TestEndpoints(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	mustOK(t, applyCmd(t, f, 1, MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: "pay-ments_1.v2", URL: "https://pay.example.com/nexus", Description: "d"}, ""))
	e, ok := st.Endpoint("pay-ments_1.v2")
	if !ok || e.URL != "https://pay.example.com/nexus" || e.Index != 1 || !e.UpdatedAt.Equal(t0) {
		t.Fatalf("endpoint = %+v %v", e, ok)
	}
	bad := []struct {
		name, url, field string
	}{
		{"", "http://h", "name"},
		{strings.Repeat("a", 129), "http://h", "name"},
		{"has space", "http://h", "name"},
		{"x/y", "http://h", "name"},
		{"ok", "ftp://h/x", "url"},
		{"ok", "/relative", "url"},
		{"ok", "http://", "url"},
		{"ok", "://bad", "url"},
	}
	for i, b := range bad {
		wantCode(t, applyCmd(t, f, uint64(10+i), MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: b.name, URL: b.url}, ""), CodeInvalidArgument, b.field)
	}
	if n := len(st.Endpoints()); n != 1 {
		t.Fatalf("rejected endpoints were written: %d rows", n)
	}
	mustOK(t, applyCmd(t, f, 30, MsgDeleteEndpoint, DeleteEndpointCommand{CommandMeta: meta0, Name: "pay-ments_1.v2"}, ""))
	wantCode(t, applyCmd(t, f, 31, MsgDeleteEndpoint, DeleteEndpointCommand{CommandMeta: meta0, Name: "pay-ments_1.v2"}, ""), CodeNotFound, "")
	if n := len(st.Endpoints()); n != 0 {
		t.Fatalf("endpoint not deleted")
	}
}

func TestForceBreaker(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	key := ForceBreakerCommand{CommandMeta: meta0, TaskGroup: "callbacks.Invocation", NamespaceID: "ns", Destination: "d"}
	open := key
	open.Mode, open.Until, open.Reason = ForceOpen, t0.Add(time.Hour), "incident 42"
	mustOK(t, applyCmd(t, f, 5, MsgForceBreaker, open, ""))
	fb := st.ForcedBreakers()
	if len(fb) != 1 || fb[0].Mode != ForceOpen || !fb[0].Until.Equal(t0.Add(time.Hour)) || fb[0].Index != 5 {
		t.Fatalf("forced = %+v", fb)
	}
	bad := key
	bad.Mode = "sideways"
	wantCode(t, applyCmd(t, f, 6, MsgForceBreaker, bad, ""), CodeInvalidArgument, "mode")
	past := key
	past.Mode, past.Until = ForceClosed, t0.Add(-time.Second)
	wantCode(t, applyCmd(t, f, 7, MsgForceBreaker, past, ""), CodeInvalidArgument, "until")

	auto := key
	auto.Mode = ForceAuto
	mustOK(t, applyCmd(t, f, 8, MsgForceBreaker, auto, ""))
	if n := len(st.ForcedBreakers()); n != 0 {
		t.Fatalf("auto did not clear: %d rows", n)
	}
	h := st.ConfigHistory(0)
	if len(h) != 2 || h[0].Key != ForceBreakerHistoryKey || h[0].Op != OpDelete || h[1].Op != OpSet || h[1].Namespace != "ns" {
		t.Fatalf("history = %+v", h)
	}
}

func TestMetaSingletons(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	mustOK(t, applyCmd(t, f, 1, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 64}, ""))
	mustOK(t, applyCmd(t, f, 2, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 64}, ""))
	r := applyCmd(t, f, 3, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 128}, "")
	wantCode(t, r, CodeConflict, "count")
	if !strings.Contains(r.Err.Message, "already 64") {
		t.Fatalf("conflict message does not say the current value: %q", r.Err.Message)
	}
	wantCode(t, applyCmd(t, f, 4, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 0}, ""), CodeInvalidArgument, "count")
	if st.ShardCount() != 64 {
		t.Fatalf("shard count = %d", st.ShardCount())
	}

	// The retired opaque shard map is refused and writes nothing.
	wantCode(t, applyCmd(t, f, 5, MsgPutShardMap, map[string]any{"at": t0, "version": 2, "data": json.RawMessage(`{"a":1}`)}, ""), CodeInvalidArgument, "command")
	if st.ShardMap() != nil {
		t.Fatalf("shard map = %+v", st.ShardMap())
	}

	mustOK(t, applyCmd(t, f, 9, MsgSetClusterID, SetClusterIDCommand{CommandMeta: meta0, ClusterID: "c1"}, ""))
	wantCode(t, applyCmd(t, f, 10, MsgSetClusterID, SetClusterIDCommand{CommandMeta: meta0, ClusterID: "c2"}, ""), CodeConflict, "cluster_id")
	if st.ClusterID() != "c1" {
		t.Fatalf("cluster id = %q", st.ClusterID())
	}
}

func TestHistoryTrimming(t *testing.T) {
	f := newTestFSM(t, StateOptions{HistoryLimit: 5})
	for i := uint64(1); i <= 12; i++ {
		mustOK(t, applyCmd(t, f, i, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: fmt.Sprintf("k%d", i%3), Value: json.RawMessage(`{}`)}, ""))
	}
	h := f.State().ConfigHistory(0)
	if len(h) != 5 {
		t.Fatalf("want 5 history entries, got %d", len(h))
	}
	for i, e := range h {
		if e.Index != uint64(12-i) {
			t.Fatalf("history[%d].Index = %d, want %d", i, e.Index, 12-i)
		}
	}
}

func TestRequestDedup(t *testing.T) {
	f := newTestFSM(t, StateOptions{RequestWindow: 5})
	st := f.State()
	cmd := SetConfigCommand{CommandMeta: meta0, Key: "k", Value: json.RawMessage(`{"v":1}`)}
	r1 := applyCmd(t, f, 1, MsgSetConfig, cmd, "req-1")
	mustOK(t, r1)
	r2 := applyCmd(t, f, 2, MsgSetConfig, cmd, "req-1")
	mustOK(t, r2)
	if r2.Index != 1 || !bytes.Equal(r1.Value, r2.Value) {
		t.Fatalf("retry not deduplicated: first %+v, second %+v", r1, r2)
	}
	if n := len(st.ConfigHistory(0)); n != 1 {
		t.Fatalf("retry applied twice: %d history entries", n)
	}
	// Errors are remembered too: a retry gets the first answer.
	bad := SetConfigCommand{CommandMeta: meta0, Key: "reject.me", Value: json.RawMessage(`{}`)}
	e1 := applyCmd(t, f, 3, MsgSetConfig, bad, "req-2")
	e2 := applyCmd(t, f, 4, MsgSetConfig, cmd, "req-2")
	wantCode(t, e1, CodeInvalidArgument, "key")
	wantCode(t, e2, CodeInvalidArgument, "key")
	// Beyond the window the id is forgotten (deterministically, by index).
	r3 := applyCmd(t, f, 7, MsgSetConfig, cmd, "req-1")
	mustOK(t, r3)
	if r3.Index != 7 {
		t.Fatalf("request id outlived its window: %+v", r3)
	}
}

func TestSubscribeWakesOnlyTouchedTables(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	st := f.State()
	cfg, cancelCfg := st.Subscribe(TableConfig)
	defer cancelCfg()
	eps, cancelEps := st.Subscribe(TableEndpoints)
	mustOK(t, applyCmd(t, f, 1, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "a", Value: json.RawMessage(`{}`)}, ""))
	mustOK(t, applyCmd(t, f, 2, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "b", Value: json.RawMessage(`{}`)}, ""))
	select {
	case <-cfg:
	default:
		t.Fatal("config subscriber not woken")
	}
	select {
	case <-cfg:
		t.Fatal("two writes should coalesce into one wake")
	default:
	}
	select {
	case <-eps:
		t.Fatal("endpoints subscriber woken by a config write")
	default:
	}
	cancelEps()
	cancelEps()
	mustOK(t, applyCmd(t, f, 3, MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: "e", URL: "http://h"}, ""))
	select {
	case <-eps:
		t.Fatal("cancelled subscriber woken")
	default:
	}
}

// A malformed entry of a known version and type is refused the same way by
// every build: an error result, and the FSM carries on. (Unknown types and
// entry versions halt it: halt_test.go.)
func TestMalformedCommands(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	r := f.Apply(1, EncodeEntry([]byte{byte(MsgSetConfig), 'x'}, ""))
	wantCode(t, r, CodeInvalidArgument, "command")
	r = f.Apply(2, []byte{entryVersion, 0xff})
	wantCode(t, r, CodeInvalidArgument, "command")
	if f.AppliedIndex() != 2 || f.HaltErr() != nil {
		t.Fatalf("applied index = %d, halt %v", f.AppliedIndex(), f.HaltErr())
	}
}

func TestErrorsIsAndWire(t *testing.T) {
	e := &Error{Code: CodeNotLeader, Message: "x", Leader: "10.0.0.1:7000"}
	b, _ := json.Marshal(&ApplyResult{Err: e})
	var back ApplyResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	wrapped := fmt.Errorf("forward: %w", back.Err)
	if !errors.Is(wrapped, ErrNotLeader) || errors.Is(wrapped, ErrNoLeader) {
		t.Fatalf("errors.Is broken for %v", wrapped)
	}
	if AsError(wrapped).Leader != "10.0.0.1:7000" || !(&Error{Code: CodeNoLeader}).Retryable() {
		t.Fatal("fields lost")
	}
}
