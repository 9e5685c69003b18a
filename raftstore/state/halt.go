package state

import (
	"fmt"
)

// HaltError is why an FSM stopped applying: an entry this build cannot read
// the way the build that wrote it meant it (an entry version it does not
// know, or a command type newer than its log version without IgnorableFlag).
// Carrying on would let this replica's state silently differ from its peers',
// so the FSM applies nothing more and the node stops (fail-stop, as Consul
// and Nomad do: OnHalt fails its store), and a restart replays the same
// entry, so it stays down until it runs a release that knows it.
type HaltError struct {
	Index uint64
	// EntryVersion is the entry's first byte.
	EntryVersion byte
	// Type is the command type; meaningful when EntryVersion is known.
	Type MessageType
	// LogVersion is the log version this build runs at.
	LogVersion int
}

func (e *HaltError) Error() string {
	if e.EntryVersion != entryVersion {
		return fmt.Sprintf("raftstore: halted at raft index %d: entry version %d is unknown to this build (it reads entry version %d, log version %d); upgrade this node to the release that wrote it",
			e.Index, e.EntryVersion, entryVersion, e.LogVersion)
	}
	return fmt.Sprintf("raftstore: halted at raft index %d: command type %d (%s, entry version %d) is unknown to this build (log version %d); upgrade this node to the release that wrote it",
		e.Index, uint8(e.Type), e.Type, e.EntryVersion, e.LogVersion)
}

// haltAt stops the FSM at index (once) and returns the entry's result.
func (f *FSM) haltAt(he *HaltError) *ApplyResult {
	if f.halt.CompareAndSwap(nil, he) {
		f.logger.Error("raftstore: HALTED: a raft entry this build does not know; applying nothing more",
			"index", he.Index, "type", uint8(he.Type), "entry_version", he.EntryVersion, "log_version", he.LogVersion, "error", he.Error())
		close(f.haltCh)
		if f.onHalt != nil {
			f.onHalt(he)
		}
	}
	return f.haltResult(he.Index)
}

// OnHalt sets fn to run, on the applying goroutine, when the FSM halts
// (the node's store fails then, and the node stops). Set it before the
// first Apply; fn must not block.
func (f *FSM) OnHalt(fn func(*HaltError)) { f.onHalt = fn }

func (f *FSM) haltResult(index uint64) *ApplyResult {
	return &ApplyResult{Index: index, Err: &Error{Code: CodeInternal, Message: f.halt.Load().Error()}}
}

// Halted is closed when the FSM halts.
func (f *FSM) Halted() <-chan struct{} { return f.haltCh }

// HaltErr is why the FSM halted, or nil.
func (f *FSM) HaltErr() *HaltError { return f.halt.Load() }

// unknownEntry reports (without halting) why this build cannot apply data:
// an unknown entry version, or a command type it does not know at its log
// version and that is not ignorable. nil for every other entry, malformed
// ones included (those get an error result on every build alike).
func (f *FSM) unknownEntry(index uint64, data []byte) *HaltError {
	if len(data) > 0 && data[0] != entryVersion {
		return &HaltError{Index: index, EntryVersion: data[0], LogVersion: f.logVersion}
	}
	_, t, _, err := DecodeEntry(data)
	if err != nil {
		return nil
	}
	if _, ok := lookupCommand(t, f.logVersion); ok || t.Ignorable() {
		return nil
	}
	return &HaltError{Index: index, EntryVersion: entryVersion, Type: t, LogVersion: f.logVersion}
}
