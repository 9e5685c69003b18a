package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// A cluster whose nodes use different log stores replicates: the log store
// is local to each node.
func TestMixedLogStoresReplicate(t *testing.T) {
	stores := map[string]string{"n1": LogStoreBolt, "n2": LogStoreWAL, "n3": LogStoreWAL}
	c := newTestCluster(t, nil)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.tweak = func(cfg *Config) { cfg.LogStore = stores[id] }
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	leader := c.leader(15 * time.Second)
	e, err := leader.SetConfig(context.Background(), state.SetConfigCommand{Key: "k", Value: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(e.Index, 10*time.Second)
	for id, kind := range stores {
		if _, err := os.Stat(logStorePath(c.dirs[id], kind)); err != nil {
			t.Errorf("%s: want its %s log store: %v", id, kind, err)
		}
		other := LogStoreWAL
		if kind == LogStoreWAL {
			other = LogStoreBolt
		}
		if _, err := os.Stat(logStorePath(c.dirs[id], other)); err == nil {
			t.Errorf("%s: a %s log store was created beside its %s one", id, other, kind)
		}
		if !hasConfigKey(c.nodes[id], "k") {
			t.Errorf("%s: the write is not applied", id)
		}
	}
}

// ranSingleNodeOn bootstraps a single-node store on kind's log store in a
// new dir, writes one entry, waits for the marker and closes it.
func ranSingleNodeOn(t *testing.T, kind string) string {
	t.Helper()
	c := newTestCluster(t, func(cfg *Config) { cfg.LogStore = kind })
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	if _, err := s.SetConfig(context.Background(), state.SetConfigCommand{Key: "k", Value: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	dir := c.dirs["n1"]
	testwait.For(t, 5*time.Second, "the raft-state marker", func() bool {
		_, err := os.Stat(filepath.Join(dir, MarkerFile))
		return err == nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A data dir holding the other log store is migrated on start: its
// entries, term and vote move to the configured store, the old store is
// removed, and the node reads what it wrote and takes new writes. Both
// directions, so an operator can go back.
func TestDataDirMigratesToTheConfiguredLogStore(t *testing.T) {
	for _, tc := range []struct{ wrote, asked string }{
		{LogStoreBolt, LogStoreWAL},
		{LogStoreWAL, LogStoreBolt},
		{LogStoreWAL, LogStoreWAL},
	} {
		t.Run(tc.wrote+"→"+tc.asked, func(t *testing.T) {
			dir := ranSingleNodeOn(t, tc.wrote)
			s := restartSingleNodeOn(t, dir, tc.asked)
			if tc.wrote != tc.asked {
				if _, err := os.Stat(logStorePath(dir, tc.wrote)); err == nil {
					t.Errorf("the %s log store is still there after the migration", tc.wrote)
				}
			}
			if _, err := os.Stat(logStorePath(dir, tc.asked)); err != nil {
				t.Errorf("no %s log store: %v", tc.asked, err)
			}
			if _, err := s.SetConfig(context.Background(), state.SetConfigCommand{Key: "k2", Value: json.RawMessage(`{"b":2}`)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// restartSingleNodeOn starts dir's single node again on kind's log store,
// waits until it leads and has applied the entry ranSingleNodeOn wrote.
func restartSingleNodeOn(t *testing.T, dir, kind string) *Store {
	t.Helper()
	c := newTestCluster(t, func(cfg *Config) { cfg.LogStore = kind })
	c.dirs["n1"] = dir
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	testwait.For(t, 10*time.Second, "the entry written before the restart", func() bool { return hasConfigKey(s, "k") })
	return s
}

// A migration that crashed is finished by the next start: before the
// rename (a partial copy under the temporary name, the old store intact)
// it is copied again; after it (both stores complete) the old one goes.
func TestInterruptedMigrationIsFinished(t *testing.T) {
	t.Run("before the rename", func(t *testing.T) {
		dir := ranSingleNodeOn(t, LogStoreBolt)
		tmp := logStorePath(dir, LogStoreWAL) + migratingSuffix
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "00000000000000000001-0000000000000001.wal"), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		restartSingleNodeOn(t, dir, LogStoreWAL)
		if _, err := os.Stat(tmp); err == nil {
			t.Error("the partial copy is still there")
		}
	})
	t.Run("after the rename", func(t *testing.T) {
		dir := ranSingleNodeOn(t, LogStoreBolt)
		// What a crash between the rename and the removal leaves: a full
		// copy in place beside the old store.
		src, err := openLogStore(dir, LogStoreBolt, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		err = copyLogStore(logStorePath(dir, LogStoreWAL), LogStoreWAL, src, hclog.NewNullLogger(), func(string, ...any) {})
		_ = src.Close()
		if err != nil {
			t.Fatal(err)
		}
		restartSingleNodeOn(t, dir, LogStoreWAL)
		if _, err := os.Stat(logStorePath(dir, LogStoreBolt)); err == nil {
			t.Error("raft.db is still there beside the finished copy")
		}
	})
}

// Two log stores that differ are not settled by guessing: the start is
// refused, naming both.
func TestDifferingLogStoresAreRefused(t *testing.T) {
	dir := ranSingleNodeOn(t, LogStoreBolt)
	src, err := openLogStore(dir, LogStoreBolt, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	err = copyLogStore(logStorePath(dir, LogStoreWAL), LogStoreWAL, src, hclog.NewNullLogger(), func(string, ...any) {})
	if err == nil {
		err = src.SetUint64([]byte("CurrentTerm"), 99) // raft.db moved on after the copy
	}
	_ = src.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{NodeID: "n1", DataDir: dir, RaftBindAddr: "127.0.0.1:0", BootstrapExpect: 1, Preset: PresetFast, LogStore: LogStoreWAL},
		Deps{Members: newFakeMembers(), Forwarder: &localForwarder{}})
	if err == nil || !strings.Contains(err.Error(), "differ") || !strings.Contains(err.Error(), LogFile) {
		t.Fatalf("want a refusal naming both stores, got %v", err)
	}
	for _, kind := range []string{LogStoreBolt, LogStoreWAL} {
		if _, err := os.Stat(logStorePath(dir, kind)); err != nil {
			t.Errorf("the refused start removed the %s store: %v", kind, err)
		}
	}
}

// A rolling change of log store: each node of a 3-node bolt cluster in
// turn is stopped and started on raft-wal (on a new port, as a restarted
// pod would be). The cluster keeps a leader and every write reaches every
// node, and each node kept its vote and log through the migration.
func TestRollingLogStoreMigration(t *testing.T) {
	// bolt is no longer the default: ask for it, and check each node has it.
	c := newTestCluster(t, func(cfg *Config) { cfg.ReapTimeout = time.Minute; cfg.LogStore = LogStoreBolt })
	ids := []string{"n1", "n2", "n3"}
	for _, id := range ids {
		c.add(id, 3)
	}
	c.start(ids...)
	leader := c.leader(15 * time.Second)
	ctx := context.Background()
	for _, id := range ids {
		if _, err := os.Stat(logStorePath(c.dirs[id], LogStoreBolt)); err != nil {
			t.Fatalf("%s did not start on raft-boltdb: %v", id, err)
		}
	}
	for i, id := range ids {
		e, err := leader.SetConfig(ctx, state.SetConfigCommand{Key: fmt.Sprintf("before-%s", id), Value: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		c.waitAllApplied(e.Index, 10*time.Second)
		c.kill(id)
		c.tweak = func(cfg *Config) { cfg.ReapTimeout = time.Minute; cfg.LogStore = LogStoreWAL }
		c.add(id, 3)
		c.start(id)
		leader = c.leader(15 * time.Second)
		e, err = leader.SetConfig(ctx, state.SetConfigCommand{Key: fmt.Sprintf("after-%s", id), Value: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatalf("write after migrating %s: %v", id, err)
		}
		c.waitAllApplied(e.Index, 15*time.Second)
		for _, done := range ids[:i+1] {
			if _, err := os.Stat(logStorePath(c.dirs[done], LogStoreBolt)); err == nil {
				t.Errorf("%s still has raft.db", done)
			}
			if !hasConfigKey(c.nodes[done], "before-n1") {
				t.Errorf("%s lost the first write", done)
			}
		}
	}
}

// A raft-wal data dir that lost its log is refused like a bolt one, naming
// raft-wal's meta file (the term and vote).
func TestLostWALLogIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		damage     func(dir string) error
	}{
		{"wal dir deleted", "wal-meta.db is missing", func(dir string) error { return os.RemoveAll(filepath.Join(dir, WALDir)) }},
		{"meta file truncated", "wal-meta.db is empty (0 bytes)", func(dir string) error {
			return os.Truncate(filepath.Join(dir, WALDir, metadb.FileName), 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := ranSingleNodeOn(t, LogStoreWAL)
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			_, err := New(Config{NodeID: "n1", DataDir: dir, RaftBindAddr: "127.0.0.1:0", BootstrapExpect: 1, Preset: PresetFast, LogStore: LogStoreWAL},
				Deps{Members: newFakeMembers(), Forwarder: &localForwarder{}})
			if !errors.Is(err, ErrLogLost) {
				t.Fatalf("want ErrLogLost, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestLogStoreConfigIsValidated(t *testing.T) {
	_, err := New(Config{NodeID: "n1", DataDir: t.TempDir(), RaftBindAddr: "127.0.0.1:0", LogStore: "rocks"}, Deps{Members: newFakeMembers()})
	if err == nil || !strings.Contains(err.Error(), "Config.LogStore") {
		t.Fatalf("want an error naming Config.LogStore, got %v", err)
	}
}

// hasConfigKey reports whether s's replica holds a config value for key.
func hasConfigKey(s *Store, key string) bool {
	for _, e := range s.Reader().Config() {
		if e.Key == key {
			return true
		}
	}
	return false
}

// raft-wal v0.4.0 lost its log after a tail truncation — raft clearing a
// follower's uncommitted suffix after an election — and a reopen: it
// marked the tail segment sealed without writing its index block, and no
// entry of that segment could be read again (hashicorp/raft-wal#31, fixed
// by #33 in v0.4.1). make chaos hit it, which kept raft-wal from being the
// default log store. This pins the fix: the truncated log reopens, keeps
// what was not truncated, takes the new leader's entry at the truncated
// index and reads it all after another reopen.
func TestRaftWALReadsItsLogAfterATailTruncation(t *testing.T) {
	dir := t.TempDir()
	reopen := func(w *wal.WAL) *wal.WAL {
		t.Helper()
		if w != nil {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		w, err := openWAL(dir, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := reopen(nil)
	var logs []*raft.Log
	for i := uint64(1); i <= 5; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteRange(4, 5); err != nil { // raft's "clearing log suffix"
		t.Fatal(err)
	}
	w = reopen(w)
	if last, err := w.LastIndex(); err != nil || last != 3 {
		t.Fatalf("last index after the truncation: %d, %v; want 3", last, err)
	}
	if err := w.StoreLogs([]*raft.Log{{Index: 4, Term: 2, Type: raft.LogCommand, Data: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	w = reopen(w)
	defer w.Close()
	for i, want := range []uint64{1, 1, 1, 2} {
		var l raft.Log
		if err := w.GetLog(uint64(i+1), &l); err != nil {
			t.Fatalf("index %d after two reopens: %v", i+1, err)
		}
		if l.Term != want {
			t.Fatalf("index %d: term %d, want %d", i+1, l.Term, want)
		}
	}
}
