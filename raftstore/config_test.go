package raftstore

import (
	"testing"
	"time"
)

// raft's CommitTimeout: the preset's unless Config.CommitTimeout is set (a
// node whose tasks live in PostgreSQL sets raft's own 50 ms).
func TestRaftConfigCommitTimeout(t *testing.T) {
	for _, c := range []struct {
		preset string
		set    time.Duration
		want   time.Duration
	}{
		{PresetLAN, 0, 10 * time.Millisecond},
		{PresetFast, 0, 5 * time.Millisecond},
		{PresetLAN, 50 * time.Millisecond, 50 * time.Millisecond},
		{PresetFast, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		cfg := Config{NodeID: "n1", Preset: c.preset, CommitTimeout: c.set}
		if got := cfg.raftConfig().CommitTimeout; got != c.want {
			t.Errorf("preset %s, CommitTimeout %v: raft's is %v, want %v", c.preset, c.set, got, c.want)
		}
	}
}
