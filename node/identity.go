package node

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"fusebox/raftstore"
)

const nodeIDFile = "node-id"

// claimDataDir creates the data dir and binds it to this node id: a data dir
// written by another node holds that node's Raft identity, and reusing it
// under a new name would make the cluster see one server twice.
func claimDataDir(dir, nodeID string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	p := filepath.Join(dir, nodeIDFile)
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.WriteFile(p, []byte(nodeID+"\n"), 0o640); err != nil {
			return fmt.Errorf("--data-dir %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	if had := strings.TrimSpace(string(b)); had != nodeID {
		return fmt.Errorf("--data-dir %s belongs to node %q, not %q: start with --node-id %s or use another --data-dir", dir, had, nodeID, had)
	}
	return nil
}

// dataDirError explains a data dir the Raft store refused: a lost log says
// how to rejoin on purpose, a damaged snapshot how to recover.
func dataDirError(err error) error {
	logStore := "the Raft log (wal/, or raft.db on a data dir from before raft-wal)"
	if lost, ok := errors.AsType[*raftstore.LogLostError](err); ok {
		logStore = lost.Store
	}
	switch {
	case errors.Is(err, raftstore.ErrLogLost):
		return fmt.Errorf("--data-dir: %w. Restore %s from a backup, or restart with --rejoin-empty (FUSEBOX_REJOIN_EMPTY=true) to rejoin the running cluster as a new member that copies the state from the leader (docs/operations.md, \"A node lost its Raft log\")", err, logStore)
	case errors.Is(err, raftstore.ErrSnapshotDamaged):
		return fmt.Errorf("--data-dir: %w. Move the Raft log (wal/ or raft.db) and snapshots/ out of the data dir (keep them for investigation) and restart with --rejoin-empty to copy the state from the leader (docs/operations.md, \"A node lost its Raft log\")", err)
	}
	return fmt.Errorf("raft: %w", err)
}

// inUse reports whether another socket holds addr (TCP), by trying to bind
// it: used after a component failed to start, to name the flag whose
// address is taken. memberlist reports its bind errors as text only
// (%v), so the error itself cannot be inspected.
func inUse(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.EADDRINUSE)
	}
	_ = ln.Close()
	return false
}

// addrError names flag when its address is taken, else returns err as is.
func addrError(flag, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) || inUse(addr) {
		return fmt.Errorf("%s %s: the address is in use (another process listens there): %w", flag, addr, err)
	}
	return err
}
