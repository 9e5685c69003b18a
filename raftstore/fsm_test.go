package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	cancelled, closed bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

type readCloser struct {
	io.Reader
	closed bool
}

func (r *readCloser) Close() error { r.closed = true; return nil }

func newAdapterFSM(t *testing.T) *FSM {
	t.Helper()
	st, err := state.NewState(state.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return NewFSM(st, nil)
}

func setConfigLog(t *testing.T, index uint64, key string) *raft.Log {
	t.Helper()
	cmd, err := state.EncodeCommand(state.MsgSetConfig, state.SetConfigCommand{CommandMeta: meta0, Key: key, Value: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: state.EncodeEntry(cmd, "")}
}

// The raft adapter hands raft's entries, snapshots and restores to the
// state machine: a command gets its *state.ApplyResult, a configuration
// entry a nil response (not a typed nil), the snapshot goes to the sink
// and is closed, a restore closes its reader.
func TestFSMAdaptsRaftToTheStateMachine(t *testing.T) {
	f := newAdapterFSM(t)
	if r, ok := f.Apply(setConfigLog(t, 1, "a")).(*state.ApplyResult); !ok || r.Err != nil {
		t.Fatalf("apply = %#v", r)
	}
	out := f.ApplyBatch([]*raft.Log{setConfigLog(t, 2, "b"), {Index: 3, Type: raft.LogConfiguration}, setConfigLog(t, 4, "c")})
	if r, ok := out[0].(*state.ApplyResult); !ok || r.Err != nil || out[1] != nil {
		t.Fatalf("batch = %#v", out)
	}
	if f.AppliedIndex() != 4 {
		t.Fatalf("applied index %d", f.AppliedIndex())
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatalf("persist: %v, closed %v, cancelled %v", err, sink.closed, sink.cancelled)
	}
	snap.Release()
	dst := newAdapterFSM(t)
	rc := &readCloser{Reader: bytes.NewReader(sink.Bytes())}
	if err := dst.Restore(rc); err != nil || !rc.closed {
		t.Fatalf("restore: %v, closed %v", err, rc.closed)
	}
	if _, ok := dst.State().ConfigEntry("c", "", ""); !ok || dst.AppliedIndex() != 4 {
		t.Fatalf("restored: entry c %v, applied %d", ok, dst.AppliedIndex())
	}
	// A failed write cancels the sink.
	snap, _ = f.Snapshot()
	bad := &failingSink{}
	if err := snap.Persist(bad); err == nil || !bad.cancelled {
		t.Fatalf("persist to a failing sink: %v, cancelled %v", err, bad.cancelled)
	}
}

type failingSink struct{ memSink }

func (s *failingSink) Write([]byte) (int, error) { return 0, errors.New("disk full") }
