package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// PeersFile is the name, in the data dir, of the manual recovery file: when
// a cluster has lost its quorum for good, an operator writes the surviving
// servers' configuration here on each of them and restarts them (the
// procedure is in docs/operations.md, "Disaster recovery"). It is the same
// format and mechanism as Consul's and Nomad's raft/peers.json.
const PeersFile = "peers.json"

// recoverFromPeersFile, when PeersFile exists, rewrites this server's Raft
// configuration to the one in the file (raft.RecoverCluster), then removes
// the file so the recovery runs once. It must run before raft starts.
func (s *Store) recoverFromPeersFile(rc *raft.Config) error {
	path := filepath.Join(s.cfg.DataDir, PeersFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("raftstore: %s: %w", path, err)
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return fmt.Errorf("raftstore: recovery file %s: %w", path, err)
	}
	self := false
	for _, sv := range conf.Servers {
		self = self || string(sv.ID) == s.cfg.NodeID
	}
	if !self {
		return fmt.Errorf("raftstore: recovery file %s does not list this node (%s)", path, s.cfg.NodeID)
	}
	s.logger.Warn("recovering the raft configuration from the peers file", "path", path, "servers", len(conf.Servers))
	// RecoverCluster replays the log through a scratch FSM to find the last
	// index; the real FSM is restored by raft when it starts.
	scratch := NewFSM(mustState(), s.logger)
	if err := raft.RecoverCluster(rc, scratch, s.logs, s.logs, s.snaps, s.trans, conf); err != nil {
		return fmt.Errorf("raftstore: recover from %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("raftstore: remove %s after recovery: %w", path, err)
	}
	s.logger.Warn("raft configuration recovered; the peers file was removed")
	return nil
}

func mustState() *state.State {
	st, err := state.NewState(state.StateOptions{})
	if err != nil {
		panic(err) // the schema is static: an error here is a bug
	}
	return st
}
