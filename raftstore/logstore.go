package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
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

// dataDirLogStore is the log store a data dir already holds ("" for none):
// the data dir decides, not the configuration, so a node restarted with
// another Config.LogStore keeps reading the log it wrote.
func dataDirLogStore(dir string) (string, error) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		_, err := os.Stat(logStorePath(dir, kind))
		switch {
		case err == nil:
			return kind, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("raftstore: %w", err)
		}
	}
	return "", nil
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
		return wal.Open(p, wal.WithLogger(hl.Named("wal")))
	}
	return nil, fmt.Errorf("unknown log store %q", kind)
}
