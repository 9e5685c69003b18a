package raftstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
)

// File names in the data dir.
const (
	// LogFile is raft-boltdb's file (LogStoreBolt): the raft log and the
	// stable store (current term and vote).
	LogFile = "raft.db"
	// MarkerFile records that this data dir has held raft state. It is
	// written the first time the node has a log entry or a snapshot, and
	// never removed; with it, an empty log at start means the log was lost,
	// not that the node never joined.
	MarkerFile = "raft-state"
	// SnapshotDir is where raft.FileSnapshotStore keeps snapshots.
	SnapshotDir = "snapshots"
)

// marker is the content of MarkerFile.
type marker struct {
	NodeID string    `json:"node_id"`
	Since  time.Time `json:"since"`
}

// ErrLogLost is matched (errors.Is) by the error New returns for a data dir
// that held raft state but whose log is gone.
var ErrLogLost = errors.New("raft log lost")

// LogLostError says which file is missing or empty and what was expected.
type LogLostError struct {
	DataDir string
	Path    string // the file that is missing or empty
	Store   string // the log store that file belongs to: the wal dir, or raft.db
	Problem string // "is missing", "is empty (0 bytes)", "holds no log entries"
	Since   time.Time
	Snaps   int // snapshots still in SnapshotDir
}

func (e *LogLostError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "raftstore: data dir %s held raft state", e.DataDir)
	if !e.Since.IsZero() {
		fmt.Fprintf(&b, " (since %s, per %s)", e.Since.Format(time.RFC3339), filepath.Join(e.DataDir, MarkerFile))
	}
	fmt.Fprintf(&b, " but %s %s: expected the raft log, current term and vote this node wrote while it was a cluster member", e.Path, e.Problem)
	if e.Snaps > 0 {
		fmt.Fprintf(&b, " (%d snapshot(s) remain in %s, but a snapshot holds neither the log after it nor the vote)", e.Snaps, filepath.Join(e.DataDir, SnapshotDir))
	}
	b.WriteString("; refusing to start: a voter that lost its log could help elect a leader that lacks committed entries")
	return b.String()
}

func (e *LogLostError) Is(target error) bool { return target == ErrLogLost }

// dirInfo is what preOpenCheck saw before the log store was opened
// (opening it creates it).
type dirInfo struct {
	marker     *marker // nil: no MarkerFile
	hadSnapDir bool
	logStore   string // the log store to open: the one the dir holds, else the configured one
}

// preOpenCheck runs before the log store is opened. It reports a lost log
// when the data dir held raft state (MarkerFile, or a snapshots dir, which
// only a previous start creates) and the log store is missing or empty.
// want is Config.LogStore, used when the dir holds no log store yet.
func preOpenCheck(dir, want string) (dirInfo, error) {
	var info dirInfo
	mk, err := readMarker(dir)
	if err != nil {
		return info, err
	}
	info.marker = mk
	if st, err := os.Stat(filepath.Join(dir, SnapshotDir)); err == nil && st.IsDir() {
		info.hadSnapDir = true
	}
	if info.logStore, err = dataDirLogStore(dir, want); err != nil {
		return info, err
	}
	if mk == nil && !info.hadSnapDir {
		return info, nil // first start (or never got that far)
	}
	p := logStorePath(dir, info.logStore)
	if info.logStore == LogStoreWAL {
		p = filepath.Join(p, metadb.FileName) // the term and vote live there
	}
	st, err := os.Stat(p)
	lost := &LogLostError{DataDir: dir, Path: p, Store: logStorePath(dir, info.logStore), Snaps: countSnapshots(dir)}
	if mk != nil {
		lost.Since = mk.Since
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		lost.Problem = "is missing"
		return info, lost
	case err != nil:
		return info, fmt.Errorf("raftstore: %s: %w", p, err)
	case st.IsDir():
		return info, fmt.Errorf("raftstore: %s is a directory; want the %s log store's file", p, info.logStore)
	case st.Size() == 0:
		lost.Problem = "is empty (0 bytes)"
		return info, lost
	}
	return info, nil
}

// postOpenCheck runs once the log store and the snapshot store are open:
// with MarkerFile present, a store with no log entries and no snapshot lost
// its log (raft.db replaced by a fresh one, say).
func postOpenCheck(dir string, info dirInfo, existing bool) error {
	if info.marker == nil || existing {
		return nil
	}
	return &LogLostError{DataDir: dir, Path: logStorePath(dir, info.logStore), Store: logStorePath(dir, info.logStore), Problem: "holds no log entries", Since: info.marker.Since}
}

func readMarker(dir string) (*marker, error) {
	p := filepath.Join(dir, MarkerFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: %s: %w", p, err)
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil {
		// A garbled marker still says the dir held state: keep the check.
		return &marker{}, nil
	}
	return &m, nil
}

// writeMarker records, once, that the data dir holds raft state. It writes
// a temporary file and renames it, so a crash leaves the old file or the
// new one.
func writeMarker(dir, nodeID string, now time.Time) error {
	p := filepath.Join(dir, MarkerFile)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	b, _ := json.Marshal(marker{NodeID: nodeID, Since: now.UTC()})
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("raftstore: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("raftstore: rename %s: %w", tmp, err)
	}
	return nil
}

// markWhenState writes MarkerFile as soon as raft holds a log entry (a
// bootstrap, or the first entry from a leader). It runs in the store's
// background group and stops on Close.
func (s *Store) markWhenState(r *raft.Raft) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		if r.LastIndex() > 0 {
			if err := writeMarker(s.cfg.DataDir, s.cfg.NodeID, time.Now()); err != nil {
				s.logger.Error("cannot record that the data dir holds raft state; a later loss of the log store would go unnoticed", "error", err)
			}
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func countSnapshots(dir string) int {
	ents, err := os.ReadDir(filepath.Join(dir, SnapshotDir))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			n++
		}
	}
	return n
}

// checkDataDir runs in New before the log store is opened: damaged snapshots are
// refused, and a lost log is refused unless Config.RejoinEmpty is set.
func (s *Store) checkDataDir() (dirInfo, error) {
	ignored, err := checkSnapshots(s.cfg.DataDir)
	for _, e := range ignored {
		s.logger.Warn("ignoring a damaged snapshot older than a good one; raft will remove it", "problem", e.Error())
	}
	if err != nil {
		return dirInfo{}, err
	}
	info, err := preOpenCheck(s.cfg.DataDir, s.cfg.LogStore)
	return info, s.lostLog(err)
}

// checkLog runs in New once the log store and the snapshot store are open.
func (s *Store) checkLog(info dirInfo) error {
	existing, err := raft.HasExistingState(s.logs, s.logs, s.snaps)
	if err != nil {
		return fmt.Errorf("raftstore: read existing state: %w", err)
	}
	if s.rejoin {
		return nil
	}
	return s.lostLog(postOpenCheck(s.cfg.DataDir, info, existing))
}

// lostLog passes err through, except a lost log with Config.RejoinEmpty,
// which sets s.rejoin.
func (s *Store) lostLog(err error) error {
	var lost *LogLostError
	if !errors.As(err, &lost) || !s.cfg.RejoinEmpty {
		return err
	}
	s.logger.Warn("the raft log is lost; rejoining the cluster as a new member as asked", "problem", lost.Error())
	s.rejoin = true
	return nil
}

// newRaft is raft.NewRaft with its start-up panics turned into errors:
// NewRaft panics ("log not found") when the log has a gap it cannot bridge,
// before it starts any goroutine. checkSnapshots catches the known cause;
// this catches the rest.
func newRaft(rc *raft.Config, fsm raft.FSM, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, trans raft.Transport) (r *raft.Raft, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("raft could not load the data dir's log and snapshots: %v", p)
		}
	}()
	return raft.NewRaft(rc, fsm, logs, stable, snaps, trans)
}
