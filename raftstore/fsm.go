package raftstore

import (
	"io"
	"log/slog"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// FSM is the raft.FSM (and raft.BatchingFSM) over a state.FSM: it only turns
// raft's types into the state machine's. Every decision — decoding, dedup,
// halting, the snapshot codec — is package state's. The embedded state.FSM
// gives AppliedIndex, WaitForApplied, Halted and HaltErr.
type FSM struct {
	*state.FSM
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// NewFSM returns an FSM writing into st. A nil logger discards.
func NewFSM(st *state.State, logger *slog.Logger) *FSM {
	return &FSM{state.NewFSM(st, logger)}
}

// Apply implements raft.FSM. It always returns *state.ApplyResult.
func (f *FSM) Apply(l *raft.Log) any { return f.FSM.Apply(l.Index, l.Data) }

// ApplyBatch implements raft.BatchingFSM: the entries raft hands over
// together go to the state machine as one batch (one transaction). A
// configuration entry's response is nil.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	entries := make([]state.Entry, len(logs))
	for i, l := range logs {
		entries[i] = state.Entry{Index: l.Index, Data: l.Data, Command: l.Type == raft.LogCommand}
	}
	res := f.FSM.ApplyBatch(entries)
	out := make([]any, len(res))
	for i, r := range res {
		if r != nil {
			out[i] = r
		}
	}
	return out
}

// Snapshot implements raft.FSM: an O(1) copy of the state, persisted later
// off the FSM goroutine. A halted FSM refuses.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	snap, err := f.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return fsmSnapshot{snap}, nil
}

// Restore implements raft.FSM.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.FSM.Restore(rc)
}

type fsmSnapshot struct{ snap *state.Snapshot }

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.snap.Persist(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}
