package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// SaveSnapshot takes a snapshot of the replicated state on the leader, as
// Consul's snapshot endpoint does: raft's user snapshot (Raft.Snapshot)
// gives the FSM stream at a known index and term, which becomes the payload
// of a snapshot file (ops_snapshot.go). version is the fusebox version
// recorded in the header.
func (s *Store) SaveSnapshot(ctx context.Context, version string) ([]byte, error) {
	r, err := s.leaderRaft()
	if err != nil {
		return nil, err
	}
	// A barrier first: everything committed before the call is in the FSM.
	if err := waitFuture(ctx, r.Barrier(s.cfg.ApplyTimeout)); err != nil {
		return nil, raftError(r, err)
	}
	f := r.Snapshot()
	if err := waitFuture(ctx, f); err != nil {
		return nil, &state.Error{Code: state.CodeUnavailable, Message: "raft snapshot: " + err.Error()}
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, &state.Error{Code: state.CodeInternal, Message: "open raft snapshot: " + err.Error()}
	}
	defer rc.Close()
	payload, err := io.ReadAll(rc)
	if err != nil {
		return nil, &state.Error{Code: state.CodeInternal, Message: "read raft snapshot: " + err.Error()}
	}
	var out bytes.Buffer
	h := SnapshotFileHeader{Index: meta.Index, Term: meta.Term, FuseboxVersion: version, ClusterID: s.state.ClusterID(),
		Node: s.cfg.NodeID, CreatedAt: time.Now().UTC()}
	if err := EncodeSnapshotFile(&out, h, payload); err != nil {
		return nil, err
	}
	s.logger.Info("snapshot saved by an operator", "index", meta.Index, "term", meta.Term, "bytes", out.Len())
	return out.Bytes(), nil
}

// RestoreResult is the answer of RestoreSnapshot.
type RestoreResult struct {
	Index           uint64 `json:"index"` // the snapshot file's raft index
	Term            uint64 `json:"term"`
	FuseboxVersion  string `json:"build_version"`
	ShardMapVersion uint64 `json:"shard_map_version"` // after fencing
}

// RestoreSnapshot replaces the cluster's state with a snapshot file's,
// through raft's Raft.Restore on the leader (which then installs it on the
// followers). The file is verified (ReadSnapshotFile), refused when written
// by another fusebox version unless force, and its payload parsed in full
// before raft sees it: raft panics when the FSM fails to restore. A shard
// count other than the cluster's is refused. The restored shard map moves
// forward: its version and every shard's epoch become greater than both
// the snapshot's and the current ones, so nodes adopt it and work fenced by
// the pre-restore epochs is refused.
func (s *Store) RestoreSnapshot(ctx context.Context, file io.Reader, version string, force bool, maxSize int64) (RestoreResult, error) {
	r, err := s.leaderRaft()
	if err != nil {
		return RestoreResult{}, err
	}
	f, err := ReadSnapshotFile(file, maxSize)
	if err != nil {
		return RestoreResult{}, err
	}
	h := f.Header
	if h.FuseboxVersion != version && !force {
		return RestoreResult{}, &state.Error{Code: state.CodeConflict, Field: "build_version", Message: fmt.Sprintf(
			"snapshot was written by fusebox %q, this cluster runs %q; pass --force to restore it anyway", h.FuseboxVersion, version)}
	}
	p, _, err := parseSnapshotPayload(f.Payload)
	if err != nil {
		return RestoreResult{}, err
	}
	cur, snap := s.state.ShardCount(), p.state.ShardCount()
	if cur != 0 && snap != 0 && cur != snap {
		return RestoreResult{}, &state.Error{Code: state.CodeConflict, Field: "shard_count", Message: fmt.Sprintf(
			"snapshot has %d shards, this cluster %d; the shard count cannot change", snap, cur)}
	}
	mapVersion, err := p.state.FenceShardMap(s.state.ShardMap(), s.state.ClusterID())
	if err != nil {
		return RestoreResult{}, err
	}
	// The applied index the FSM reports after the restore: raft restores at
	// max(last index, meta.Index)+1, i.e. LastIndex()+1 with Index 0.
	next := r.LastIndex() + 1
	var payload bytes.Buffer
	if err := p.state.WriteSnapshot(&payload, next); err != nil {
		return RestoreResult{}, err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(payload.Len())}
	timeout := s.cfg.ApplyTimeout * 6
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	if err := r.Restore(meta, &payload, timeout); err != nil {
		if strings.Contains(err.Error(), "cannot restore snapshot now") {
			return RestoreResult{}, unavailable("raft: %v; retry in a moment", err)
		}
		return RestoreResult{}, raftError(r, err)
	}
	s.logger.Warn("restored the cluster state from a snapshot file", "index", h.Index, "term", h.Term,
		"build_version", h.FuseboxVersion, "forced", force, "shard_map_version", mapVersion)
	return RestoreResult{Index: h.Index, Term: h.Term, FuseboxVersion: h.FuseboxVersion, ShardMapVersion: mapVersion}, nil
}
