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

// FreshLag is twice the preset's heartbeat timeout, fixed when the store is
// built: the queue asks for it before every call, and it must not build a
// raft.Config each time (it did: an allocation per delivered task).
func TestFreshLagIsFixedPerPreset(t *testing.T) {
	for preset, want := range map[string]time.Duration{PresetLAN: 2 * time.Second, PresetFast: 500 * time.Millisecond} {
		c := newTestCluster(t, func(cfg *Config) { cfg.Preset = preset })
		s := c.add("n1", 1)
		var got time.Duration
		if n := testing.AllocsPerRun(100, func() { got = s.FreshLag() }); n != 0 {
			t.Errorf("%s: FreshLag allocates %v times", preset, n)
		}
		if got != want {
			t.Errorf("%s: FreshLag %v, want %v", preset, got, want)
		}
	}
}
