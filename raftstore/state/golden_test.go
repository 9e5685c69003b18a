package state

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite raftstore/testdata golden files")

// goldenCommands is one entry per command type, applied in this order to a
// fresh FSM (so each later one meets the rows of the earlier ones). Append
// a line for a new type, then: go test ./raftstore -run Golden -update.
func goldenCommands() []struct {
	t       MessageType
	payload any
} {
	nt := NewTask{ID: "task-1", Shard: 1, NamespaceID: "ns", WorkflowID: "wf", TaskGroup: "nexus", Destination: "ep", Request: json.RawMessage(`{"url":"http://x"}`)}
	nt2 := nt
	nt2.ID, nt2.Deadline = "task-2", t0.Add(time.Hour)
	nt3 := nt2
	nt3.ID, nt3.RequestID = "task-3", "rid-3"
	nt4 := nt
	nt4.ID, nt4.RequestID = "task-4", "rid-3"
	return []struct {
		t       MessageType
		payload any
	}{
		{MsgSetClusterID, SetClusterIDCommand{CommandMeta: meta0, ClusterID: "golden"}},
		{MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 4}},
		{MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "a", Value: json.RawMessage(`{"x": 1}`)}},
		{MsgSetConfigValue, SetConfigCommand{CommandMeta: meta0, Key: "b", Value: json.RawMessage(`{"y":2}`)}},
		{MsgDeleteConfig, DeleteConfigCommand{CommandMeta: meta0, Key: "a"}},
		{MsgImportConfig, ImportConfigCommand{CommandMeta: meta0, Keys: []string{"c"}, Entries: []ConfigEntry{{Key: "c", Value: json.RawMessage(`1`)}}}},
		{MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: "ep", URL: "http://127.0.0.1:1/x"}},
		{MsgDeleteEndpoint, DeleteEndpointCommand{CommandMeta: meta0, Name: "ep"}},
		{MsgForceBreaker, ForceBreakerCommand{CommandMeta: meta0, TaskGroup: "nexus", NamespaceID: "ns", Destination: "ep", Mode: ForceOpen}},
		{MsgPutShardMap, struct{}{}},
		{MsgCommitShardMap, CommitShardMapCommand{CommandMeta: meta0}},
		{MsgSetShardPin, SetShardPinCommand{CommandMeta: meta0, Shard: 1, Node: "n1"}},
		{MsgReleaseShard, ReleaseShardCommand{CommandMeta: meta0, Shard: 1}},
		{MsgSetDrainingNode, SetDrainingNodeCommand{CommandMeta: meta0, Node: "n2", Draining: true, Reason: "operator"}},
		{MsgSync, struct{}{}},
		{MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{nt}}},
		{MsgCompleteTasks, CompleteTasksCommand{CommandMeta: meta0, Shard: 0, Epoch: 1, Node: "n1", Results: []TaskResult{{TaskID: "task-1", Status: "succeeded", Attempts: 1}}}},
		{MsgRedriveTasks, RedriveTasksCommand{CommandMeta: meta0, All: true}},
		{MsgCollectTasks, CollectTasksCommand{CommandMeta: meta0, Before: t0.Add(1e12)}},
		// Log version 3: the binary twins (goldenEncode).
		{MsgSubmitTasksBin, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{nt2}}},
		{MsgCompleteTasksBin, CompleteTasksCommand{CommandMeta: meta0, Shard: 0, Epoch: 1, Node: "n1", Results: []TaskResult{{TaskID: "task-2", Status: "succeeded", Attempts: 1}}}},
		// Log version 5: several shards' completes in one entry.
		{MsgCompleteTasksMulti, CompleteTasksMultiCommand{Sections: []CompleteTasksCommand{
			{CommandMeta: meta0, Shard: 0, Epoch: 1, Node: "n1", Results: []TaskResult{{TaskID: "task-2", Status: "pending", Attempts: 2, NextAttemptAt: t0.Add(time.Minute)}}},
			{CommandMeta: meta0, Shard: 1, Epoch: 7, Node: "n1", Results: []TaskResult{{TaskID: "task-1", Status: "failed", Attempts: 1, Message: "stale"}}},
		}}},
		// Log version 6: moved tasks, one new (with its counters, request id
		// and deadline), one whose id is stored (task-2), one whose request
		// id the first just took.
		{MsgImportTasks, ImportTasksCommand{CommandMeta: meta0, Tasks: []ImportedTask{
			{NewTask: nt3, Attempts: 3, NextAttemptAt: t0.Add(time.Minute), CreatedAt: t0.Add(-time.Hour)},
			{NewTask: nt2, Attempts: 1, NextAttemptAt: t0, CreatedAt: t0},
			{NewTask: nt4, NextAttemptAt: t0, CreatedAt: t0},
		}}},
	}
}

// TestGoldenEntries decodes and applies the stored bytes of one entry per
// command type and compares each result with the stored one, then checks
// the stored snapshot restores: every later release must read them alike.
func TestGoldenEntries(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	if *updateGolden {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := newTestFSM(t, StateOptions{})
	seen := map[MessageType]bool{}
	for i, c := range goldenCommands() {
		seen[c.t] = true
		name := filepath.Join(dir, fmt.Sprintf("type%02d", uint8(c.t)))
		if *updateGolden {
			cmd, err := goldenEncode(c.t, c.payload)
			if err != nil {
				t.Fatal(err)
			}
			writeGolden(t, name+".entry", EncodeEntry(cmd, fmt.Sprintf("golden-%d", i)))
		}
		data := readGolden(t, name+".entry")
		res := f.Apply(uint64(i+1), data)
		got, _ := json.Marshal(res)
		if *updateGolden {
			writeGolden(t, name+".result.json", got)
		}
		if want := readGolden(t, name+".result.json"); !bytes.Equal(got, want) {
			t.Errorf("%s: result %s, golden %s", c.t, got, want)
		}
	}
	for typ := range commands {
		if !seen[typ] {
			t.Errorf("command type %d (%s) has no golden entry", typ, typ)
		}
	}
	if f.HaltErr() != nil {
		t.Fatal(f.HaltErr())
	}
	snapPath := filepath.Join(dir, "snapshot.bin")
	if *updateGolden {
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := snap.Persist(&b); err != nil {
			t.Fatal(err)
		}
		writeGolden(t, snapPath, b.Bytes())
	}
	golden := readGolden(t, snapPath)
	// This build writes the same state as the same bytes: the snapshot
	// layout (tables, rows, order) is unchanged, though requests and counters
	// left go-memdb (side_tables.go).
	if got := snapshotBytes(t, f); !bytes.Equal(got, golden) {
		t.Errorf("snapshot of the golden entries differs from the golden snapshot:\n%s", got)
	}
	g := newTestFSM(t, StateOptions{})
	if err := g.Restore(bytes.NewReader(golden)); err != nil {
		t.Fatalf("golden snapshot: %v", err)
	}
	if got := snapshotBytes(t, g); !bytes.Equal(got, golden) {
		t.Errorf("the restored golden snapshot re-encodes differently:\n%s", got)
	}
	if g.AppliedIndex() != f.AppliedIndex() {
		t.Fatalf("restored applied index %d, want %d", g.AppliedIndex(), f.AppliedIndex())
	}
	if _, ok := g.State().ConfigEntry("b", "", ""); !ok {
		t.Fatal("restored snapshot lacks config entry b")
	}
	// Snapshots written by earlier releases are kept beside the current one
	// (snapshot-logvN.bin, never regenerated): each must still restore.
	older, err := filepath.Glob(filepath.Join(dir, "snapshot-logv*.bin"))
	if err != nil || len(older) == 0 {
		t.Fatalf("no older golden snapshots in %s (%v)", dir, err)
	}
	for _, p := range older {
		h := newTestFSM(t, StateOptions{})
		if err := h.Restore(bytes.NewReader(readGolden(t, p))); err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		if _, ok := h.State().ConfigEntry("b", "", ""); !ok || h.AppliedIndex() == 0 {
			t.Fatalf("%s: restored without config entry b or its applied index", filepath.Base(p))
		}
	}
}

// goldenEncode encodes a golden command in its type's encoding.
func goldenEncode(t MessageType, payload any) ([]byte, error) {
	switch c := payload.(type) {
	case SubmitTasksCommand:
		if t == MsgSubmitTasksBin {
			return EncodeSubmitTasksBin(&c)
		}
	case CompleteTasksCommand:
		if t == MsgCompleteTasksBin {
			return EncodeCompleteTasksBin(&c)
		}
	case CompleteTasksMultiCommand:
		return EncodeCompleteTasksMulti(&c)
	}
	return EncodeCommand(t, payload)
}

func writeGolden(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readGolden(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it once: go test ./raftstore -run Golden -update)", err)
	}
	return b
}
