package raftstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// A node whose raft log store stops taking writes (a full disk, an I/O
// error) cannot follow the cluster: raft refuses the leader's appends, so
// the node applies nothing new — no new task, no shard map that moves a
// shard away from it — while the leader's heartbeats still reach it and
// gossip still says it is alive. It used to keep its shards and go on
// calling from its frozen copy: the tasks submitted to its shards were
// never called, and its calls could be for shards it no longer owned.
// raft-wal makes it worse: a segment rotation that fails (no space for the
// next segment) leaves the tail sealed, and every later append fails with
// "segment is sealed" until the process restarts, whatever space is freed.
//
// So writes are watched (guardedLogs, below raft's log cache). An episode
// of failures starts at the first failed write and ends only once writes
// have succeeded for a quiet period (LogFailFatal/4) with none failing: on
// a full disk a small append can still fit in a page already allocated,
// and a single success should not restart the count. During an episode
// the node is
// out of contact (InContact: it makes no call) and not ready. Once it has
// lasted LogFailFatal, with a write failed within the last quiet period,
// the store fails (Failed, FailErr): the node stops, as a process that
// cannot store its log must (fail-stop), and its shards move to the
// others. A restart on a data dir with room again reopens the log
// (raft-wal recovers a torn tail) and catches up.

// guardedLogs is the node's log store with its failed writes tracked.
type guardedLogs struct {
	logStore
	onFail func()        // after each failed write
	quiet  time.Duration // successes alone for this long end an episode

	failingSince atomic.Int64 // UnixNano of the episode's first failed write; 0: none
	lastFail     atomic.Int64 // UnixNano of the last failed write
	failures     atomic.Uint64
	lastErr      atomic.Pointer[error]
}

func (g *guardedLogs) StoreLog(l *raft.Log) error { return g.track(g.logStore.StoreLog(l)) }

func (g *guardedLogs) StoreLogs(ls []*raft.Log) error { return g.track(g.logStore.StoreLogs(ls)) }

// IsMonotonic passes raft-wal's answer through (raft.MonotonicLogStore):
// raft's log cache asks the store it wraps, and a store that does not say
// so is treated as one that takes gaps after a snapshot restore.
func (g *guardedLogs) IsMonotonic() bool {
	m, ok := g.logStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (g *guardedLogs) track(err error) error {
	now := time.Now().UnixNano()
	if err == nil {
		if g.failingSince.Load() != 0 && now-g.lastFail.Load() >= int64(g.quiet) {
			g.failingSince.Store(0) // a quiet period of good writes: the episode is over
		}
		return nil
	}
	g.failures.Add(1)
	g.lastErr.Store(&err)
	g.lastFail.Store(now)
	g.failingSince.CompareAndSwap(0, now)
	if g.onFail != nil {
		g.onFail()
	}
	return err
}

// failing reports since when writes have failed (the episode's start), the
// last failure and its error; ok false outside an episode.
func (g *guardedLogs) failing() (since, last time.Time, err error, ok bool) {
	ns := g.failingSince.Load()
	if ns == 0 {
		return time.Time{}, time.Time{}, nil, false
	}
	if p := g.lastErr.Load(); p != nil {
		err = *p
	}
	return time.Unix(0, ns), time.Unix(0, g.lastFail.Load()), err, true
}

// logFailure is the store's side: it arms a check when writes start to
// fail, and fails the store if they still fail LogFailFatal later.
type logFailure struct {
	mu     sync.Mutex
	timer  *time.Timer
	failed chan struct{} // closed by fail
	err    error         // set before failed is closed
	once   sync.Once
}

// logWriteFailed runs after each failed write: the first of an episode
// arms the check.
func (s *Store) logWriteFailed() {
	s.logFail.mu.Lock()
	defer s.logFail.mu.Unlock()
	if s.logFail.timer == nil && s.ctx.Err() == nil {
		s.logFail.timer = time.AfterFunc(s.logFailFatal, s.checkLogWrites)
	}
}

// checkLogWrites fails the store once an episode of failed writes has
// lasted LogFailFatal and a write failed within its last quiet period.
// Short of that (an episode that ended and a new one that began, or one
// with no write tried lately: nothing to judge by), it looks again when
// the verdict could change.
func (s *Store) checkLogWrites() {
	s.logFail.mu.Lock()
	defer s.logFail.mu.Unlock()
	s.logFail.timer = nil
	if s.ctx.Err() != nil {
		return
	}
	since, last, err, ok := s.guard.failing()
	if !ok {
		return
	}
	if left := s.logFailFatal - time.Since(since); left > 0 {
		s.logFail.timer = time.AfterFunc(left, s.checkLogWrites)
		return
	}
	if time.Since(last) > s.guard.quiet {
		s.logFail.timer = time.AfterFunc(s.guard.quiet, s.checkLogWrites)
		return
	}
	do := fmt.Sprintf("make room or fix the disk of %s, then start it again", s.cfg.DataDir)
	if errors.Is(err, wal.ErrSealed) {
		// raft-wal (v0.4.2) does not reopen a log whose segment rotation
		// failed: its tail stays sealed on every start, with any room.
		do = fmt.Sprintf("make room on the disk of %s, then start it again; if it fails the same way with room, raft-wal cannot reopen this log: move %s and %s out of the data dir and start the node with --rejoin-empty (docs/operations.md, \"A node lost its Raft log\")",
			s.cfg.DataDir, logStorePath(s.cfg.DataDir, LogStoreWAL), filepath.Join(s.cfg.DataDir, SnapshotDir))
	}
	s.fail(fmt.Errorf("raftstore: the raft log store has refused writes for %v (since %s): %w; this node cannot follow the cluster and stops: %s",
		time.Since(since).Round(time.Second), since.UTC().Format(time.RFC3339), err, do))
}

// fail fails the store once: Failed is closed and FailErr says why.
func (s *Store) fail(err error) {
	s.logFail.once.Do(func() {
		s.logFail.err = err
		s.logger.Error("raftstore: FAILED; the node must stop", "error", err)
		close(s.logFail.failed)
	})
}

// stopLogWatch stops a pending check (Close).
func (s *Store) stopLogWatch() {
	s.logFail.mu.Lock()
	defer s.logFail.mu.Unlock()
	if s.logFail.timer != nil {
		s.logFail.timer.Stop()
		s.logFail.timer = nil
	}
}

// Failed is closed when this store can no longer work — its log store has
// refused writes for LogFailFatal, or its FSM halted at an entry this
// build does not know (halt.go) — and the node should stop. FailErr says
// why.
func (s *Store) Failed() <-chan struct{} { return s.logFail.failed }

// FailErr is why the store failed, or nil.
func (s *Store) FailErr() error {
	select {
	case <-s.logFail.failed:
		return s.logFail.err
	default:
		return nil
	}
}

// LogWritesFailing reports since when this node's raft log store has
// refused writes (an episode, logguard.go), and the last error; ok false
// outside one.
func (s *Store) LogWritesFailing() (since time.Time, err error, ok bool) {
	if s.guard == nil {
		return time.Time{}, nil, false
	}
	since, _, err, ok = s.guard.failing()
	return since, err, ok
}
