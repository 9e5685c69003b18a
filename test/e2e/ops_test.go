package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// fuseboxCLI runs the real binary as an operator would, with the token in
// the environment, and returns its combined output and exit code.
func fuseboxCLI(t *testing.T, token string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), "FUSEBOX_TOKEN="+token, "FUSEBOX_ADDR=", "FUSEBOX_TOKEN_FILE=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("fusebox %v: %v", args, err)
	return "", -1
}

func gossipKey(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// The operator toolkit against three real processes: a live gossip key
// rotation that a restarted node survives, a snapshot saved, restored and a
// damaged one refused, and the CLI's exit codes.
func TestOperatorToolkit(t *testing.T) {
	const token = "e2e-ops-admin-token-0123456789abcdef"
	keyDir := t.TempDir()
	oldKey, newKey := gossipKey(t), gossipKey(t)
	c := NewCluster(t, 3, ClusterOptions{AdminToken: token, Tweak: func(cfg *ProcessConfig) {
		f := filepath.Join(keyDir, cfg.NodeID+".keys")
		if err := os.WriteFile(f, []byte(oldKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--gossip-key-file", f)
	}})
	defer c.StopAll(t)
	addr := c.Procs[0].HTTPAddr()
	admin := func(want int, args ...string) string {
		t.Helper()
		out, code := fuseboxCLI(t, token, append([]string{"admin", "--addr", addr}, args...)...)
		if code != want {
			t.Fatalf("fusebox admin %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return out
	}

	// Keyring rotation, live.
	admin(3, "keyring", "remove", oldKey) // in use everywhere
	admin(0, "keyring", "install", newKey)
	admin(0, "keyring", "use", newKey)
	out := admin(0, "keyring", "remove", oldKey)
	if strings.Contains(out, newKey) || strings.Contains(out, oldKey) || !strings.Contains(out, "sha256:") {
		t.Fatalf("keyring output must show fingerprints, never keys:\n%s", out)
	}
	n3 := c.Procs[2]
	if err := n3.Restart(context.Background()); err != nil {
		t.Fatalf("restart n3 after the rotation: %v", err)
	}
	testwait.ForErr(t, 45*time.Second, "three alive voters after n3's restart", func() error { return c.CheckMembership(3) })

	// Snapshot: save, change, restore; a damaged file is refused.
	snap := filepath.Join(t.TempDir(), "state.snap")
	admin(0, "endpoints", "put", "ep-saved", "http://127.0.0.1:1/saved")
	admin(0, "snapshot", "save", snap)
	if out := admin(0, "snapshot", "inspect", snap); !strings.Contains(out, "endpoints") {
		t.Fatalf("inspect:\n%s", out)
	}
	admin(0, "endpoints", "delete", "ep-saved")
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.snap")
	b[len(b)/2+len(b)/4] ^= 0x01
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	admin(3, "snapshot", "restore", bad)
	admin(0, "snapshot", "restore", snap)
	for _, p := range c.Procs {
		testwait.ForErr(t, 20*time.Second, p.Name()+" has the restored endpoint", func() error {
			if _, err := p.Client().Endpoint(context.Background(), "ep-saved"); err != nil {
				return err
			}
			return nil
		})
	}

	// Versions and usage.
	if out, code := fuseboxCLI(t, token, "version", "--addr", addr); code != 0 || strings.Count(out, "alive") != 3 {
		t.Fatalf("version --addr: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"bogus"}, {"admin", "bogus"}, {"admin", "raft", "remove-peer"}, {"admin", "snapshot", "inspect"}} {
		if out, code := fuseboxCLI(t, token, args...); code != 2 {
			t.Errorf("fusebox %v: exit %d, want 2\n%s", args, code, out)
		}
	}
	if out, code := fuseboxCLI(t, token, "admin", "--addr", "127.0.0.1:1", "members"); code != 4 || !bytes.Contains([]byte(out), []byte("FUSEBOX_ADDR")) {
		t.Fatalf("refused connection: exit %d\n%s", code, out)
	}
}

// Over TLS: a follower relays raft and snapshot calls to the leader over
// mutual TLS with the caller's token, and a keyring listing fans out to
// every member with the node's own token.
func TestOperatorToolkitOverTLS(t *testing.T) {
	c, _ := newTLSCluster(t)
	defer c.StopAll(t)
	ctx := context.Background()
	leader := c.WaitForLeader(t, leaderTimeout)
	f := c.Followers(t)[0]
	var file bytes.Buffer
	if _, err := f.Client().SaveSnapshot(ctx, &file); err != nil {
		t.Fatalf("snapshot through follower %s: %v", f.Name(), err)
	}
	if !bytes.HasPrefix(file.Bytes(), []byte(`{"format":"fusebox-snapshot"`)) {
		t.Fatalf("not a snapshot file: %.80q", file.Bytes())
	}
	ans, err := f.Client().Keyring(ctx, "list", "")
	if err != nil || ans.Members != 3 || ans.Failed != 0 || len(ans.Keys) != 1 || ans.Keys[0].PrimaryOn != 3 {
		t.Fatalf("keyring list over TLS: %+v %v", ans, err)
	}
	res, err := f.Client().TransferLeader(ctx, f.Name())
	if err != nil || res.From != leader.Name() {
		t.Fatalf("transfer-leader through %s: %+v %v", f.Name(), res, err)
	}
	testwait.ForErr(t, leaderTimeout, f.Name()+" leading", func() error {
		l, err := c.Leader()
		if err != nil {
			return err
		}
		if l != f {
			return errors.New(l.Name() + " leads")
		}
		return nil
	})
}
