package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fusebox/raftstore/state"
)

// The snapshot commands end to end on a real node: save, inspect, restore
// after a change, and a damaged file refused with exit 3.
func TestAdminSnapshotSaveInspectRestore(t *testing.T) {
	h := newAdminNode(t, 4)
	file := filepath.Join(t.TempDir(), "b.snap")
	h.mustRun("", "endpoints", "put", "ep-one", "http://127.0.0.1:1/one")
	h.mustRun("saved "+file, "snapshot", "save", file)
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v %v", fi, err)
	}
	out := h.mustRun("endpoints", "snapshot", "inspect", file)
	if !strings.Contains(out, "shards") || !strings.Contains(out, "(verified)") {
		t.Fatalf("inspect:\n%s", out)
	}
	h.mustRun("", "endpoints", "delete", "ep-one")
	h.mustRun("restored "+file, "snapshot", "restore", file)
	h.eventually("ep-one", "endpoints", "list")

	b, _ := os.ReadFile(file)
	b[len(b)-3] ^= 0x04
	bad := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.run("snapshot", "restore", bad); exitCode(err) != 3 || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("damaged file: want exit 3 naming the checksum, got %v", err)
	}
	if _, err := h.run("snapshot", "inspect", bad); exitCode(err) != 3 {
		t.Fatalf("inspect of a damaged file: want exit 3, got %v", err)
	}
}

func TestAdminRaftOpsAndUsageExitCodes(t *testing.T) {
	h := newAdminNode(t, 4)
	// The node says what its Raft log is stored on (raft-wal by default).
	if out, err := h.run("raft"); err != nil || !strings.Contains(out, "; log store wal") {
		t.Fatalf("admin raft: want the log store in its first line, got %q, %v", out, err)
	}
	// A single voter has nobody to hand leadership to: the cluster refuses (3).
	if _, err := h.run("raft", "transfer-leader"); exitCode(err) != 3 {
		t.Fatalf("transfer on a one-voter cluster: want exit 3, got %v", err)
	}
	if _, err := h.run("raft", "remove-peer", "n1"); exitCode(err) != 3 || !strings.Contains(err.Error(), "leader") {
		t.Fatalf("removing the leader: want exit 3, got %v", err)
	}
	for _, args := range [][]string{{"bogus"}, {"raft", "bogus"}, {"snapshot", "save"}, {"keyring", "use"}, {"raft", "remove-peer", "--nope", "x"}} {
		if _, err := h.run(args...); exitCode(err) != 2 {
			t.Errorf("%v: want exit 2, got %v", args, err)
		}
	}

	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version", "--addr", h.n.HTTPAddr()})
	wantLogV := fmt.Sprintf(" %d\n", state.BuildLogVersion()) // the LOG VERSION column
	if err := root.ExecuteContext(h.ctx); err != nil || !strings.Contains(out.String(), "n1") || !strings.Contains(out.String(), "test") || !strings.Contains(out.String(), wantLogV) {
		t.Fatalf("version --addr: %v\n%s", err, out.String())
	}
	root = rootCmd()
	root.SetArgs([]string{"nope"})
	if err := usageExit(root.ExecuteContext(h.ctx)); exitCode(err) != 2 {
		t.Fatalf("unknown root command: want exit 2, got %v", err)
	}
}
