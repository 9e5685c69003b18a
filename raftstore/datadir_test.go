package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"fusebox/raftstore/state"
)

// openStore runs New on dir as the test cluster would, without starting it,
// on raft-boltdb: these tests damage raft.db (logstore_test.go has raft-wal's).
func openStore(t *testing.T, dir, id string, rejoin bool) (*Store, error) {
	t.Helper()
	s, err := New(Config{NodeID: id, DataDir: dir, RaftBindAddr: "127.0.0.1:0", BootstrapExpect: 1, Preset: PresetFast, RejoinEmpty: rejoin, LogStore: LogStoreBolt},
		Deps{Members: newFakeMembers(), Forwarder: &localForwarder{}})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// ranSingleNode bootstraps a single-node store on raft-boltdb in a new dir,
// writes one entry, waits for the marker and closes it.
func ranSingleNode(t *testing.T) string {
	t.Helper()
	return ranSingleNodeOn(t, LogStoreBolt)
}

func TestLostLogIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		damage     func(t *testing.T, dir string)
	}{
		{"raft.db deleted", "raft.db is missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, LogFile)); err != nil {
				t.Fatal(err)
			}
		}},
		{"raft.db truncated", "raft.db is empty (0 bytes)", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, LogFile), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"raft.db replaced by a fresh one", "raft.db holds no log entries", func(t *testing.T, dir string) {
			p := filepath.Join(dir, LogFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			b, err := raftboltdb.NewBoltStore(p)
			if err != nil {
				t.Fatal(err)
			}
			_ = b.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := ranSingleNode(t)
			// RejoinEmpty does nothing while the log is intact.
			if s, err := openStore(t, dir, "n1", true); err != nil || s.rejoin {
				t.Fatalf("intact data dir: err %v, rejoin %v", err, s != nil && s.rejoin)
			}
			// That store holds dir until Cleanup: damage a copy.
			dir2 := t.TempDir()
			copyDir(t, dir, dir2)
			tc.damage(t, dir2)
			_, err := openStore(t, dir2, "n1", false)
			if !errors.Is(err, ErrLogLost) {
				t.Fatalf("want ErrLogLost, got %v", err)
			}
			for _, w := range []string{tc.want, "refusing to start", MarkerFile} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := openStore(t, dir2, "n1", true); err != nil {
				t.Fatalf("RejoinEmpty: %v", err)
			}
		})
	}
}

// A node that never held raft state (it waited to be added and was stopped)
// starts again; so does a first start.
func TestNeverJoinedDataDirStarts(t *testing.T) {
	c := newTestCluster(t, nil)
	c.add("n1", 0)
	c.start("n1")
	dir := c.dirs["n1"]
	c.kill("n1")
	if _, err := os.Stat(filepath.Join(dir, MarkerFile)); err == nil {
		t.Fatal("marker written although the node never had a log entry")
	}
	if _, err := openStore(t, dir, "n1", false); err != nil {
		t.Fatalf("never-joined data dir refused: %v", err)
	}
	if _, err := openStore(t, t.TempDir(), "n2", false); err != nil {
		t.Fatalf("first start refused: %v", err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
}

// makeSnapshot writes a real snapshot with raft's FileSnapshotStore and
// returns its directory.
func makeSnapshot(t *testing.T, dir string, term, index uint64) string {
	t.Helper()
	fs, err := raft.NewFileSnapshotStore(dir, 5, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	conf := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "a", Suffrage: raft.Voter}}}
	sink, err := fs.Create(raft.SnapshotVersionMax, index, term, conf, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte(`{"format":"fusebox-raftstore","version":1,"applied":1}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, SnapshotDir, sink.ID())
}

func TestDamagedSnapshotIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		damage           func(p string) error
	}{
		{"meta.json missing", "meta.json", "is missing", os.Remove},
		{"meta.json empty", "meta.json", "is empty", func(p string) error { return os.Truncate(p, 0) }},
		{"meta.json garbled", "meta.json", "is not valid snapshot metadata JSON", func(p string) error { return os.WriteFile(p, []byte("{\"Version\":1,\"Ind"), 0o600) }},
		{"meta.json not an object", "meta.json", "is not valid snapshot metadata JSON", func(p string) error { return os.WriteFile(p, []byte("[1,2]"), 0o600) }},
		{"meta.json zeroed fields", "meta.json", "want both > 0", func(p string) error { return os.WriteFile(p, []byte(`{"Version":1,"CRC":"AQ=="}`), 0o600) }},
		{"state.bin missing", "state.bin", "is missing", os.Remove},
		{"state.bin truncated", "state.bin", "meta.json says", func(p string) error { return os.Truncate(p, 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			makeSnapshot(t, dir, 2, 10)
			snap := makeSnapshot(t, dir, 2, 20)
			if _, err := checkSnapshots(dir); err != nil {
				t.Fatalf("good snapshots refused: %v", err)
			}
			p := filepath.Join(snap, tc.file)
			if err := tc.damage(p); err != nil {
				t.Fatal(err)
			}
			_, err := openStore(t, dir, "n1", true)
			if !errors.Is(err, ErrSnapshotDamaged) {
				t.Fatalf("want ErrSnapshotDamaged, got %v", err)
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s and say %q", err, p, tc.want)
			}
		})
	}
}

// A damaged snapshot older than a good one is what a crash leaves while raft
// removes an old snapshot: raft never reads it, so it is not refused.
func TestDamagedOlderSnapshotIsIgnored(t *testing.T) {
	dir := t.TempDir()
	old := makeSnapshot(t, dir, 2, 10)
	makeSnapshot(t, dir, 2, 20)
	if err := os.Remove(filepath.Join(old, snapMetaFile)); err != nil {
		t.Fatal(err)
	}
	ignored, err := checkSnapshots(dir)
	if err != nil || len(ignored) != 1 || !strings.Contains(ignored[0].Error(), old) {
		t.Fatalf("want the old snapshot ignored, got ignored=%v err=%v", ignored, err)
	}
}

// Without the check, raft itself panics on this data dir: the newest
// snapshot is skipped for its unreadable meta.json, and NewRaft scans a log
// compacted past it. The check turns that into an error; newRaft recovers
// the panic if anything else causes it.
func TestSnapshotMetaMissingDoesNotPanic(t *testing.T) {
	c := newTestCluster(t, func(cfg *Config) { cfg.SnapshotThreshold = 4; cfg.TrailingLogs = 1; cfg.LogStore = LogStoreBolt })
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	for i := range 20 {
		if _, err := s.SetConfig(context.Background(), state.SetConfigCommand{Key: "k", Namespace: fmt.Sprint("ns", i), Value: json.RawMessage(`{"a":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.raft.Load().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	dir := c.dirs["n1"]
	c.kill("n1")
	ents, _ := os.ReadDir(filepath.Join(dir, SnapshotDir))
	for _, e := range ents {
		_ = os.Remove(filepath.Join(dir, SnapshotDir, e.Name(), snapMetaFile))
	}
	_, err := openStore(t, dir, "n1", false)
	if !errors.Is(err, ErrSnapshotDamaged) {
		t.Fatalf("want ErrSnapshotDamaged, got %v", err)
	}
	// What raft does without the check: NewRaft panics; newRaft turns the
	// panic into an error.
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	rc := raft.DefaultConfig()
	rc.LocalID = "n1"
	rc.Logger = newHCLogger(slog.New(slog.DiscardHandler), "raft", nil)
	r, err := newRaft(rc, NewFSM(mustState(), slog.New(slog.DiscardHandler)), bolt, bolt, snaps, trans)
	if err == nil {
		_ = r.Shutdown().Error()
		t.Fatal("raft started on a log compacted past its only snapshot")
	}
	if !strings.Contains(err.Error(), "log not found") {
		t.Fatalf("want raft's 'log not found' as an error, got %v", err)
	}
}

// removeLogStore deletes dir's raft log, whichever store holds it.
func removeLogStore(t *testing.T, dir string) {
	t.Helper()
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		if err := os.RemoveAll(logStorePath(dir, kind)); err != nil {
			t.Fatal(err)
		}
	}
}
