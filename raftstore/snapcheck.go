package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"
)

// Files of one raft.FileSnapshotStore snapshot directory.
const (
	snapMetaFile  = "meta.json"
	snapStateFile = "state.bin"
)

// ErrSnapshotDamaged is matched (errors.Is) by the error New returns for a
// snapshot directory raft could not use.
var ErrSnapshotDamaged = errors.New("snapshot damaged")

// SnapshotDamagedError names the snapshot file that is missing or unreadable.
type SnapshotDamagedError struct {
	Path    string
	Problem string
}

func (e *SnapshotDamagedError) Error() string {
	return fmt.Sprintf("raftstore: snapshot file %s %s; every directory in %s needs a readable %s and %s", e.Path, e.Problem, SnapshotDir, snapMetaFile, snapStateFile)
}

func (e *SnapshotDamagedError) Is(target error) bool { return target == ErrSnapshotDamaged }

// checkSnapshots validates every snapshot directory before raft sees it.
// raft.FileSnapshotStore skips a snapshot whose meta.json it cannot read
// (logging a warning), so raft then starts from an older snapshot or none,
// over a log that was compacted past it, and NewRaft panics with "log not
// found" scanning for configuration entries. Checking here turns that into
// an error naming the file. A damaged snapshot older than a good one is
// harmless (raft uses the newer one and reaps the old; a crash while raft
// removes an old snapshot leaves one like it): it is returned in ignored for
// the caller to log. Temporary (".tmp") directories are raft's own
// unfinished snapshots, which it ignores.
func checkSnapshots(dir string) (ignored []error, err error) {
	root := filepath.Join(dir, SnapshotDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: read %s: %w", root, err)
	}
	type damaged struct {
		err  error
		name string
	}
	var bad []damaged
	var newest [2]uint64 // term, index of the newest good snapshot
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		m, err := checkSnapshot(filepath.Join(root, e.Name()))
		if err != nil {
			bad = append(bad, damaged{err, e.Name()})
			continue
		}
		if k := [2]uint64{m.Term, m.Index}; k[0] > newest[0] || (k[0] == newest[0] && k[1] > newest[1]) {
			newest = k
		}
	}
	for _, b := range bad {
		// raft names a snapshot directory term-index-millis.
		var term, index, ms uint64
		if n, _ := fmt.Sscanf(b.name, "%d-%d-%d", &term, &index, &ms); n == 3 &&
			(term < newest[0] || (term == newest[0] && index < newest[1])) {
			ignored = append(ignored, b.err)
			continue
		}
		return ignored, b.err
	}
	return ignored, nil
}

// snapMeta is raft's fileSnapshotMeta (unexported): SnapshotMeta plus the
// state file's CRC.
type snapMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

func checkSnapshot(path string) (*snapMeta, error) {
	mp := filepath.Join(path, snapMetaFile)
	b, err := os.ReadFile(mp)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &SnapshotDamagedError{Path: mp, Problem: "is missing"}
	case err != nil:
		return nil, &SnapshotDamagedError{Path: mp, Problem: "cannot be read: " + err.Error()}
	case len(bytes.TrimSpace(b)) == 0:
		return nil, &SnapshotDamagedError{Path: mp, Problem: "is empty"}
	}
	var m snapMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &SnapshotDamagedError{Path: mp, Problem: "is not valid snapshot metadata JSON: " + err.Error()}
	}
	switch {
	case m.Version < raft.SnapshotVersionMin || m.Version > raft.SnapshotVersionMax:
		return nil, &SnapshotDamagedError{Path: mp, Problem: fmt.Sprintf("has snapshot version %d; want %d to %d", m.Version, raft.SnapshotVersionMin, raft.SnapshotVersionMax)}
	case m.Index == 0 || m.Term == 0:
		return nil, &SnapshotDamagedError{Path: mp, Problem: fmt.Sprintf("has index %d and term %d; want both > 0", m.Index, m.Term)}
	case len(m.CRC) == 0:
		return nil, &SnapshotDamagedError{Path: mp, Problem: "has no CRC"}
	}
	sp := filepath.Join(path, snapStateFile)
	st, err := os.Stat(sp)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &SnapshotDamagedError{Path: sp, Problem: "is missing"}
	case err != nil:
		return nil, &SnapshotDamagedError{Path: sp, Problem: "cannot be read: " + err.Error()}
	case !st.Mode().IsRegular():
		return nil, &SnapshotDamagedError{Path: sp, Problem: "is not a regular file"}
	case st.Size() != m.Size:
		return nil, &SnapshotDamagedError{Path: sp, Problem: fmt.Sprintf("is %d bytes; %s says %d", st.Size(), snapMetaFile, m.Size)}
	}
	return &m, nil
}
