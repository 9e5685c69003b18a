package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
)

// Log stores (Config.LogStore). Both hold the raft log and the stable store
// (current term and vote).
const (
	// LogStoreBolt is raft-boltdb/v2: one bbolt file, LogFile.
	LogStoreBolt = "bolt"
	// LogStoreWAL is hashicorp/raft-wal: segment files and a small bbolt
	// meta file in WALDir.
	LogStoreWAL = "wal"
)

// WALDir is raft-wal's directory in the data dir.
const WALDir = "wal"

// logStore is what raft needs of a log store, and Close.
type logStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// logStorePath is the file or directory of kind's log in dir: the path a
// lost-log error names.
func logStorePath(dir, kind string) string {
	if kind == LogStoreWAL {
		return filepath.Join(dir, WALDir)
	}
	return filepath.Join(dir, LogFile)
}

// dataDirLogStore is the log store New opens before any migration: the
// one the data dir holds, else want. With both present (a migration that
// stopped after its rename) it is the one that is not want, so that New
// calls migrateLogStore, which settles the pair.
func dataDirLogStore(dir, want string) (string, error) {
	other := LogStoreWAL
	if want == LogStoreWAL {
		other = LogStoreBolt
	}
	have := map[string]bool{}
	for _, kind := range []string{want, other} {
		_, err := os.Stat(logStorePath(dir, kind))
		switch {
		case err == nil:
			have[kind] = true
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("raftstore: %w", err)
		}
	}
	if have[other] {
		return other, nil
	}
	return want, nil
}

// openLogStore opens (creating if needed) the kind log store in dir.
func openLogStore(dir, kind string, hl hclog.Logger) (logStore, error) {
	switch kind {
	case LogStoreBolt:
		return raftboltdb.NewBoltStore(logStorePath(dir, kind))
	case LogStoreWAL:
		p := logStorePath(dir, kind)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
		return openWAL(p, hl)
	}
	return nil, fmt.Errorf("unknown log store %q", kind)
}

// openWAL opens raft-wal in dir with a meta store of our own: wal.Open
// that fails after loading the meta file leaves it open (and flock'd), so
// a later open of the same dir in this process — a retry, a migration —
// would wait for the lock forever. WAL.Close closes it (since v0.4.1).
func openWAL(dir string, hl hclog.Logger) (*wal.WAL, error) {
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithLogger(hl.Named("wal")), wal.WithMetaStore(meta))
	if err != nil {
		_ = meta.Close()
		return nil, err
	}
	return w, nil
}

// stableKeys are the keys hashicorp/raft keeps in the stable store: the
// current term and the vote (raft.go; raft-wal's migrate.CopyStable lists
// the same, but fails on a key never written, as on a node that never
// voted).
var (
	stableUintKeys = []string{"CurrentTerm", "LastVoteTerm"}
	stableKeys     = []string{"LastVoteCand"}
)

// migratingSuffix names a log store being written by a migration; a start
// that finds one removes it and migrates again.
const migratingSuffix = ".migrating"

// migrateLogStore makes want the data dir's log store when the dir holds
// the other one (from): it copies every log entry and the term and vote
// into a new store under a temporary name, closes it (both stores fsync
// every write), renames it into place and removes the old store. A crash
// before the rename leaves the old store and a temporary one, which the
// next start removes before copying again; a crash after it leaves two
// identical stores, and the next start keeps want's and removes the other.
func migrateLogStore(dir, from, want string, hl hclog.Logger, log func(msg string, args ...any)) error {
	tmp := logStorePath(dir, want) + migratingSuffix
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if _, err := os.Stat(logStorePath(dir, want)); err == nil {
		// Both stores: a crash after the rename leaves two identical ones.
		// Anything else (say an older build that ran with --rejoin-empty
		// beside a migrated store) is for the operator to settle.
		if err := sameLogStores(dir, from, want, hl); err != nil {
			return fmt.Errorf("both %s and %s hold a raft log and they differ (%w): move the one that is not this node's current log out of the data dir",
				logStorePath(dir, from), logStorePath(dir, want), err)
		}
		log("removing the log store a finished migration left behind", "log_store", from)
		return removeAndSync(dir, logStorePath(dir, from))
	}
	src, err := openLogStore(dir, from, hl)
	if err != nil {
		return fmt.Errorf("open the %s log store: %w", from, err)
	}
	defer src.Close()
	first, _ := src.FirstIndex()
	last, _ := src.LastIndex()
	log("migrating the raft log to another log store", "from", from, "to", want, "first_index", first, "last_index", last)
	if err := copyLogStore(tmp, want, src, hl, log); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := src.Close(); err != nil {
		return fmt.Errorf("close the %s log store: %w", from, err)
	}
	if err := os.Rename(tmp, logStorePath(dir, want)); err != nil {
		return err
	}
	if err := removeAndSync(dir, logStorePath(dir, from)); err != nil {
		return err
	}
	log("raft log migrated", "from", from, "to", want, "entries", entriesBetween(first, last))
	return nil
}

// copyLogStore writes src's entries, term and vote into a new kind store at
// path, and closes it.
func copyLogStore(path, kind string, src logStore, hl hclog.Logger, log func(msg string, args ...any)) (err error) {
	var dst logStore
	if kind == LogStoreWAL {
		if err := os.MkdirAll(path, 0o700); err != nil {
			return err
		}
		dst, err = openWAL(path, hl)
	} else {
		dst, err = raftboltdb.NewBoltStore(path)
	}
	if err != nil {
		return fmt.Errorf("create the %s log store: %w", kind, err)
	}
	defer func() {
		if cerr := dst.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close the %s log store: %w", kind, cerr)
		}
	}()
	if last, _ := src.LastIndex(); last > 0 {
		progress := make(chan string, 16)
		logged := make(chan struct{})
		go logMigrationProgress(progress, logged, log)
		err := migrate.CopyLogs(context.Background(), dst, src, 1<<20, progress) // closes progress
		<-logged
		if err != nil {
			return err
		}
	}
	for _, k := range stableUintKeys {
		v, err := src.GetUint64([]byte(k))
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	for _, k := range stableKeys {
		v, err := src.Get([]byte(k))
		if isNotFound(err) || (err == nil && len(v) == 0) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	return nil
}

// migrationProgressEvery is how often a migration logs its progress.
const migrationProgressEvery = 5 * time.Second

// logMigrationProgress logs raft-wal's CopyLogs progress messages, the
// first, then at most one per migrationProgressEvery, and the last, until
// progress is closed; then it closes logged.
func logMigrationProgress(progress <-chan string, logged chan<- struct{}, log func(msg string, args ...any)) {
	defer close(logged)
	var last time.Time
	var pending string
	for m := range progress {
		pending = strings.TrimSpace(m)
		if time.Since(last) >= migrationProgressEvery {
			log("migrating the raft log", "progress", pending)
			last, pending = time.Now(), ""
		}
	}
	if pending != "" {
		log("migrating the raft log", "progress", pending)
	}
}

// isNotFound is a stable store's "no such key" (raft itself matches the
// text: both stores answer "not found").
func isNotFound(err error) bool { return err != nil && err.Error() == "not found" }

func entriesBetween(first, last uint64) uint64 {
	if last == 0 || last < first {
		return 0
	}
	return last - first + 1
}

// removeAndSync removes path (a file or a directory) and syncs dir, so the
// removal survives a crash.
func removeAndSync(dir, path string) error {
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// sameLogStores reports, as an error naming the first difference, whether
// the a and b stores in dir hold different logs (first and last index,
// the last entry's term) or different terms and votes.
func sameLogStores(dir, a, b string, hl hclog.Logger) error {
	type summary struct {
		first, last, lastTerm, term, voteTerm uint64
		vote                                  string
	}
	read := func(kind string) (summary, error) {
		st, err := openLogStore(dir, kind, hl)
		if err != nil {
			return summary{}, err
		}
		defer st.Close()
		var s summary
		s.first, _ = st.FirstIndex()
		s.last, _ = st.LastIndex()
		if s.last > 0 {
			var l raft.Log
			if err := st.GetLog(s.last, &l); err != nil {
				return summary{}, err
			}
			s.lastTerm = l.Term
		}
		s.term, _ = st.GetUint64([]byte("CurrentTerm"))
		s.voteTerm, _ = st.GetUint64([]byte("LastVoteTerm"))
		v, _ := st.Get([]byte("LastVoteCand"))
		s.vote = string(v)
		return s, nil
	}
	sa, err := read(a)
	if err != nil {
		return err
	}
	sb, err := read(b)
	if err != nil {
		return err
	}
	if sa != sb {
		return fmt.Errorf("%s: %+v, %s: %+v", a, sa, b, sb)
	}
	return nil
}
