package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

func TestSnapshotSaveRestoreOnThreeNodes(t *testing.T) {
	c := threeVoters(t, longReap)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := c.leader(10 * time.Second)
	if _, err := leader.SetShardCount(ctx, state.SetShardCountCommand{Count: 4}); err != nil {
		t.Fatal(err)
	}
	m1 := &shardmap.Map{Version: 1, NumShards: 4, Shards: []shardmap.Assignment{{Shard: 0, Owner: "n1", Epoch: 1}, {Shard: 1, Owner: "n2", Epoch: 1}, {Shard: 2, Owner: "n3", Epoch: 1}, {Shard: 3, Owner: "n1", Epoch: 1}}}
	if _, err := leader.CommitShardMap(ctx, state.CommitShardMapCommand{Map: m1}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.SetConfig(ctx, state.SetConfigCommand{Key: "k.one", Value: json.RawMessage(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.PutEndpoint(ctx, state.PutEndpointCommand{Name: "ep-a", URL: "https://a.example.com"}); err != nil {
		t.Fatal(err)
	}

	if _, err := c.follower().SaveSnapshot(ctx, "v1"); !errors.Is(err, state.ErrNotLeader) {
		t.Fatalf("save on a follower: want not_leader, got %v", err)
	}
	file, err := leader.SaveSnapshot(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadSnapshotFile(bytes.NewReader(file), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if f.Header.Index == 0 || f.Header.Term == 0 || f.Header.FuseboxVersion != "v1" || f.Header.Node != leader.NodeID() {
		t.Fatalf("header %+v", f.Header)
	}
	sum, err := InspectSnapshot(f)
	if err != nil {
		t.Fatal(err)
	}
	if sum.ConfigEntries != 1 || sum.Endpoints != 1 || sum.ShardCount != 4 || sum.ShardMapVersion != 1 {
		t.Fatalf("summary %+v", sum)
	}

	// Change the state after the snapshot.
	e2, err := leader.SetConfig(ctx, state.SetConfigCommand{Key: "k.one", Value: json.RawMessage(`{"v":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.DeleteEndpoint(ctx, state.DeleteEndpointCommand{Name: "ep-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.PutEndpoint(ctx, state.PutEndpointCommand{Name: "ep-b", URL: "https://b.example.com"}); err != nil {
		t.Fatal(err)
	}
	m2 := &shardmap.Map{Version: 2, NumShards: 4, Shards: []shardmap.Assignment{{Shard: 0, Owner: "n2", Epoch: 2}, {Shard: 1, Owner: "n2", Epoch: 1}, {Shard: 2, Owner: "n3", Epoch: 1}, {Shard: 3, Owner: "n1", Epoch: 1}}}
	if _, err := leader.CommitShardMap(ctx, state.CommitShardMapCommand{PrevVersion: 1, Map: m2}); err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e2.Index, 5*time.Second)

	// A flipped byte, in the payload or the header, is refused; nothing changes.
	for _, at := range []int{len(file) - 10, 20, bytes.IndexByte(file, '\n') + 5} {
		bad := bytes.Clone(file)
		bad[at] ^= 0x01
		if _, err := leader.RestoreSnapshot(ctx, bytes.NewReader(bad), "v1", true, 1<<30); !errors.Is(err, state.ErrInvalidArgument) {
			t.Fatalf("byte %d flipped: want invalid_argument, got %v", at, err)
		}
	}
	if _, err := leader.RestoreSnapshot(ctx, bytes.NewReader(file), "v2", false, 1<<30); !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("version mismatch: want conflict naming --force, got %v", err)
	}
	if e, _ := leader.Reader().ConfigEntry("k.one", "", ""); string(e.Value) != `{"v":2}` {
		t.Fatalf("a refused restore changed the state: %s", e.Value)
	}

	res, err := leader.RestoreSnapshot(ctx, bytes.NewReader(file), "v1", false, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if res.Index != f.Header.Index || res.ShardMapVersion != 3 {
		t.Fatalf("restore result %+v", res)
	}
	testwait.For(t, 15*time.Second, "the snapshot's state on every node", func() bool {
		for _, s := range c.nodes {
			st := s.Reader()
			e, ok := st.ConfigEntry("k.one", "", "")
			_, hasA := st.Endpoint("ep-a")
			_, hasB := st.Endpoint("ep-b")
			m := st.ShardMap()
			if !ok || string(e.Value) != `{"v":1}` || !hasA || hasB || m == nil || m.Version != 3 {
				return false
			}
			// Fenced: owners from the snapshot, epochs above both maps.
			if m.Shards[0].Owner != "n1" || m.Shards[0].Epoch != 3 || m.Shards[1].Epoch != 2 {
				return false
			}
		}
		return true
	})
	// The cluster keeps taking writes, applied everywhere.
	e3, err := c.follower().SetConfig(ctx, state.SetConfigCommand{Key: "k.two", Value: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e3.Index, 10*time.Second)
	if leader.Reader().ShardCount() != 4 {
		t.Fatal("shard count lost")
	}
}

func TestReadSnapshotFileRefusals(t *testing.T) {
	payload := []byte(`{"format":"fusebox-raftstore","version":1,"applied":3}` + "\n")
	var good bytes.Buffer
	if err := EncodeSnapshotFile(&good, SnapshotFileHeader{Index: 3, Term: 1, FuseboxVersion: "t"}, payload); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSnapshotFile(bytes.NewReader(good.Bytes()), 1<<20); err != nil {
		t.Fatal(err)
	}
	hdr, _, _ := bytes.Cut(good.Bytes(), []byte("\n"))
	for name, tc := range map[string]struct {
		file  []byte
		field string
	}{
		"empty":         {nil, "header"},
		"not json":      {[]byte("hello\n"), "header"},
		"other format":  {[]byte(`{"format":"x"}` + "\n"), "format"},
		"newer version": {[]byte(`{"format":"fusebox-snapshot","version":2}` + "\n"), "version"},
		"truncated":     {good.Bytes()[:good.Len()-3], "payload"},
		"trailing":      {append(bytes.Clone(good.Bytes()), 'x'), "payload"},
		"too big":       {append(bytes.Clone(hdr), '\n'), "payload_size"},
	} {
		max := int64(1 << 20)
		if name == "too big" {
			max = 10
		}
		_, err := ReadSnapshotFile(bytes.NewReader(tc.file), max)
		var e *state.Error
		if !errors.As(err, &e) || e.Code != state.CodeInvalidArgument || e.Field != tc.field {
			t.Errorf("%s: want invalid_argument on %q, got %v", name, tc.field, err)
		}
	}
}

// FuzzReadSnapshotFile feeds arbitrary files to the parser and, when one
// verifies, to the payload parser a restore runs: no panic, and a verified
// file re-encodes to itself.
func FuzzReadSnapshotFile(f *testing.F) {
	var good bytes.Buffer
	payload := []byte(`{"format":"fusebox-raftstore","version":1,"applied":3}` + "\n" + `{"t":"endpoints","r":{"name":"a","url":"https://a"}}` + "\n")
	_ = EncodeSnapshotFile(&good, SnapshotFileHeader{Index: 3, Term: 1, FuseboxVersion: "t"}, payload)
	f.Add(good.Bytes())
	f.Add([]byte(`{"format":"fusebox-snapshot","version":1,"state_version":1,"payload_size":0,"payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}` + "\n"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := ReadSnapshotFile(bytes.NewReader(data), 1<<20)
		if err != nil {
			return
		}
		_, _ = InspectSnapshot(sf)
		var again bytes.Buffer
		if err := EncodeSnapshotFile(&again, sf.Header, sf.Payload); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshotFile(&again, 1<<20); err != nil {
			t.Fatalf("a verified file does not verify after re-encoding: %v", err)
		}
	})
}
