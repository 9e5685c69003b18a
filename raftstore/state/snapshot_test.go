package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"fusebox/shardmap"
)

func populate(t *testing.T, f *FSM) uint64 {
	t.Helper()
	i := uint64(0)
	next := func() uint64 { i++; return i }
	for k := 0; k < 5; k++ {
		mustOK(t, applyCmd(t, f, next(), MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: fmt.Sprintf("k%d", k), Namespace: "ns", Value: json.RawMessage(fmt.Sprintf(`{"v":%d}`, k))}, fmt.Sprintf("r%d", k)))
	}
	mustOK(t, applyCmd(t, f, next(), MsgDeleteConfig, DeleteConfigCommand{CommandMeta: meta0, Key: "k0", Namespace: "ns"}, ""))
	mustOK(t, applyCmd(t, f, next(), MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: "ep", URL: "http://127.0.0.1:1/x"}, ""))
	mustOK(t, applyCmd(t, f, next(), MsgForceBreaker, ForceBreakerCommand{CommandMeta: meta0, TaskGroup: "g", NamespaceID: "ns", Destination: "d", Mode: ForceOpen, Until: t0.Add(time.Minute)}, ""))
	mustOK(t, applyCmd(t, f, next(), MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 16}, ""))
	m, _, _ := shardmap.Rebalance(mustNewMap(t, 16), []string{"a", "b"}, nil)
	mustOK(t, applyCmd(t, f, next(), MsgCommitShardMap, CommitShardMapCommand{CommandMeta: meta0, Map: m}, ""))
	mustOK(t, applyCmd(t, f, next(), MsgSetDrainingNode, SetDrainingNodeCommand{CommandMeta: meta0, Node: "b", Draining: true, Reason: DrainOperator}, ""))
	mustOK(t, applyCmd(t, f, next(), MsgSetClusterID, SetClusterIDCommand{CommandMeta: meta0, ClusterID: "cid"}, ""))
	return i
}

type dump struct {
	Config     []ConfigEntry
	History    []HistoryEntry
	Endpoints  []Endpoint
	Forced     []ForcedBreaker
	ShardCount int
	ShardMap   *shardmap.Map
	Draining   []DrainingNode
	ClusterID  string
}

func dumpState(s *State) dump {
	return dump{s.Config(), s.ConfigHistory(0), s.Endpoints(), s.ForcedBreakers(), s.ShardCount(), s.ShardMap(), s.DrainingNodes(), s.ClusterID()}
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := newTestFSM(t, StateOptions{})
	last := populate(t, src)
	data := snapshotBytes(t, src)

	dst := newTestFSM(t, StateOptions{})
	wake, cancel := dst.State().Subscribe(TableEndpoints)
	defer cancel()
	if err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dumpState(src.State()), dumpState(dst.State())); diff != "" {
		t.Fatalf("restored state differs (-src +dst):\n%s", diff)
	}
	if dst.AppliedIndex() != last {
		t.Fatalf("applied index after restore = %d, want %d", dst.AppliedIndex(), last)
	}
	if again := snapshotBytes(t, dst); !bytes.Equal(again, data) {
		t.Fatal("snapshot of the restored state is not byte-identical")
	}
	select {
	case <-wake:
	default:
		t.Fatal("restore did not wake subscribers")
	}
	// Dedup survives the snapshot.
	r := applyCmd(t, dst, last+1, MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "k1", Namespace: "ns", Value: json.RawMessage(`{"v":99}`)}, "r1")
	mustOK(t, r)
	if e, _ := dst.State().ConfigEntry("k1", "ns", ""); string(e.Value) != `{"v":1}` || r.Index != 2 {
		t.Fatalf("request id forgotten across restore: %+v %s", r, e.Value)
	}
}

func TestRestoreRejectsBadStreamAndKeepsState(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	populate(t, f)
	before := dumpState(f.State())
	for _, bad := range []string{
		"",
		`{"format":"other","version":1}`,
		`{"format":"fusebox-raftstore","version":1}` + "\n" + `{"t":"nope","r":{}}`,
		`{"format":"fusebox-raftstore","version":1}` + "\n" + `{"t":"config","r":`,
	} {
		if err := f.Restore(strings.NewReader(bad)); err == nil {
			t.Fatalf("restore of %q succeeded", bad)
		}
	}
	if diff := cmp.Diff(before, dumpState(f.State())); diff != "" {
		t.Fatalf("failed restore changed state:\n%s", diff)
	}
}

// ShardCount is 0 until the count is set, then the count; a restore of a
// snapshot with another count answers the restored one at once, though
// the count was read (and memoized) before it.
func TestShardCountAfterSetAndRestore(t *testing.T) {
	src := newTestFSM(t, StateOptions{})
	mustOK(t, applyCmd(t, src, 1, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 8}, ""))
	data := snapshotBytes(t, src)

	dst := newTestFSM(t, StateOptions{})
	if n := dst.State().ShardCount(); n != 0 {
		t.Fatalf("shard count before it is set = %d, want 0", n)
	}
	mustOK(t, applyCmd(t, dst, 1, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 16}, ""))
	for range 2 { // the second answer comes from the memo
		if n := dst.State().ShardCount(); n != 16 {
			t.Fatalf("shard count after it was set = %d, want 16", n)
		}
	}
	if r := applyCmd(t, dst, 2, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 32}, ""); r.Err == nil {
		t.Fatal("a second, different shard count was accepted")
	}
	if err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if n := dst.State().ShardCount(); n != 8 {
		t.Fatalf("shard count after restoring a snapshot of 8 = %d, want 8", n)
	}
}
