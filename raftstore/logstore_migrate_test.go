package raftstore

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// boltDirWithLog writes n entries of size bytes each into a raft-boltdb
// store in a new data dir, with a term and vote, as a node on the old
// default leaves it, and returns the dir.
func boltDirWithLog(tb testing.TB, n, size int) string {
	tb.Helper()
	dir := tb.TempDir()
	b, err := raftboltdb.NewBoltStore(logStorePath(dir, LogStoreBolt))
	if err != nil {
		tb.Fatal(err)
	}
	data := make([]byte, size)
	batch := make([]*raft.Log, 0, 512)
	for i := 1; i <= n; i++ {
		batch = append(batch, &raft.Log{Index: uint64(i), Term: 3, Type: raft.LogCommand, Data: data})
		if len(batch) == cap(batch) || i == n {
			if err := b.StoreLogs(batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		tb.Fatal(err)
	}
	if err := b.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// A migration logs where it is, so that an operator watching a node copy
// a large log on its first start with raft-wal sees it move, and logs the
// end with the count.
func TestLogStoreMigrationLogsProgress(t *testing.T) {
	const n = 3000
	dir := boltDirWithLog(t, n, 1024) // about 3 MB: three of CopyLogs' 1 MiB batches
	var mu sync.Mutex
	var lines []string
	log := func(msg string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprint(append([]any{msg}, args...)...))
	}
	if err := migrateLogStore(dir, LogStoreBolt, LogStoreWAL, hclog.NewNullLogger(), log); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"starting to copy 3000 log entries", "DONE: took", "raft log migrated"} {
		if !strings.Contains(all, want) {
			t.Errorf("the migration's log lacks %q:\n%s", want, all)
		}
	}
	w, err := openWAL(logStorePath(dir, LogStoreWAL), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if last, err := w.LastIndex(); err != nil || last != n {
		t.Fatalf("migrated log ends at %d (%v), want %d", last, err, n)
	}
	if term, err := w.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
		t.Fatalf("migrated term %d (%v), want 3", term, err)
	}
}

// BenchmarkLogStoreMigration is the first start of an upgraded node: its
// raft.db copied into raft-wal. A full log on raft's defaults holds up to
// SnapshotThreshold + TrailingLogs entries (8,192 + 10,240); the sizes are
// a control-plane-sized entry and a large task batch.
func BenchmarkLogStoreMigration(b *testing.B) {
	for _, size := range []int{256, 16 << 10} {
		b.Run(fmt.Sprintf("entries=18432/bytes=%d", size), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dir := boltDirWithLog(b, 18432, size)
				b.StartTimer()
				if err := migrateLogStore(dir, LogStoreBolt, LogStoreWAL, hclog.NewNullLogger(), func(string, ...any) {}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(18432*size)/1e6, "log-MB")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/migration")
		})
	}
}
