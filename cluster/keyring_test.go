package cluster

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// KeyringChange drives memberlist's rotation on live members and persists
// every step to the key file in the LoadKeyFile format, atomically.
func TestKeyringChangeRotatesAndPersists(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	nodes := startCluster(t, 2, withKeys(k1))
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "a.keys"), filepath.Join(dir, "b.keys")}

	if _, err := nodes[0].KeyringChange("use", k2, files[0]); !errors.Is(err, ErrKeyring) || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("use before install: want ErrKeyring, got %v", err)
	}
	for _, op := range []string{"install", "use"} {
		for i, n := range nodes {
			if _, err := n.KeyringChange(op, k2, files[i]); err != nil {
				t.Fatalf("%s on %d: %v", op, i, err)
			}
		}
	}
	if _, err := nodes[0].KeyringChange("remove", k2, files[0]); !errors.Is(err, ErrKeyring) || !strings.Contains(err.Error(), "primary") {
		t.Fatalf("removing the primary: want ErrKeyring, got %v", err)
	}
	for i, n := range nodes {
		infos, err := n.KeyringChange("remove", k1, files[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || !infos[0].Primary || infos[0].Fingerprint != Fingerprint(k2) {
			t.Fatalf("keys after rotation: %+v", infos)
		}
	}
	for _, f := range files {
		keys, err := LoadKeyFile(f)
		if err != nil || len(keys) != 1 || !bytes.Equal(keys[0], k2) {
			t.Fatalf("%s: %d keys, %v", f, len(keys), err)
		}
		if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v", f, fi.Mode())
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*")); len(left) > 0 {
			t.Fatalf("temporary files left: %v", left)
		}
	}
	// The rotated members still talk: a node with only k2 joins them.
	late := startNode(t, "late", withKeys(k2), joining(nodes[0].GossipAddr()))
	waitConverged(t, append(nodes, late), 3)

	plain := startNode(t, "plain")
	if _, err := plain.Keys(); !errors.Is(err, ErrKeyring) {
		t.Fatalf("Keys without encryption: want ErrKeyring, got %v", err)
	}
}

func TestWriteKeyFileRoundTripAndFingerprint(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	path := filepath.Join(t.TempDir(), "g.keys")
	if err := WriteKeyFile(path, [][]byte{k2, k1}); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeyFile(path)
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], k2) || !bytes.Equal(keys[1], k1) {
		t.Fatalf("round trip: %d keys, %v", len(keys), err)
	}
	fp := Fingerprint(k1)
	if !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+16 || strings.Contains(fp, base64.StdEncoding.EncodeToString(k1)) {
		t.Fatalf("fingerprint %q", fp)
	}
	if _, err := DecodeKey("not base64!"); !errors.Is(err, ErrKeyring) {
		t.Fatalf("bad key: %v", err)
	}
	if _, err := DecodeKey(base64.StdEncoding.EncodeToString([]byte("short"))); !errors.Is(err, ErrKeyring) {
		t.Fatalf("short key: %v", err)
	}
}
