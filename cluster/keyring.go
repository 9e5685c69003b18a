package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Live keyring operations (fusebox admin keyring), memberlist's rotation
// as `consul keyring` drives it: install (AddKey) on every member, then use
// (UseKey), then remove (RemoveKey) the old key. Each change is persisted
// to the node's key file, when it has one, so a restarted node rejoins with
// the keys in force.

// ErrKeyring marks a refused keyring operation (bad key, key in use, key
// not installed, no encryption); the message says which.
var ErrKeyring = errors.New("keyring")

// KeyInfo is one installed key, by fingerprint only.
type KeyInfo struct {
	Fingerprint string
	Primary     bool
}

// Fingerprint names a key without revealing it: "sha256:" and the first 8
// bytes of its SHA-256, in hex.
func Fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// DecodeKey parses one base64 gossip key, as in the key file.
func DecodeKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: key is not base64: %v", ErrKeyring, err)
	}
	if err := validKeyLen(len(key)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyring, err)
	}
	return key, nil
}

// Keys lists the installed keys, the primary (encrypting) one first.
func (m *Membership) Keys() ([]KeyInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.keyringReady(); err != nil {
		return nil, err
	}
	return keyInfos(m.keyring.GetPrimaryKey(), m.keyring.GetKeys()), nil
}

// KeyringChange installs, uses (makes primary) or removes key on this node
// and, with file set, rewrites file with the resulting keys (primary
// first) by an atomic rename. Removing the primary key and using a key
// that is not installed are refused (ErrKeyring). If the file cannot be
// written the keyring change is undone.
func (m *Membership) KeyringChange(op string, key []byte, file string) ([]KeyInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.keyringReady(); err != nil {
		return nil, err
	}
	kr := m.keyring
	primary := kr.GetPrimaryKey()
	installed := false
	for _, k := range kr.GetKeys() {
		installed = installed || bytes.Equal(k, key)
	}
	fp := Fingerprint(key)
	var do, undo func() error
	switch op {
	case "install":
		if installed {
			return keyInfos(primary, kr.GetKeys()), nil
		}
		do, undo = func() error { return kr.AddKey(key) }, func() error { return kr.RemoveKey(key) }
	case "use":
		if !installed {
			return nil, fmt.Errorf("%w: key %s is not installed on this node; install it everywhere first", ErrKeyring, fp)
		}
		do, undo = func() error { return kr.UseKey(key) }, func() error { return kr.UseKey(primary) }
	case "remove":
		if bytes.Equal(key, primary) {
			return nil, fmt.Errorf("%w: key %s is the primary key (in use for encryption); use another key first", ErrKeyring, fp)
		}
		if !installed {
			return keyInfos(primary, kr.GetKeys()), nil
		}
		do, undo = func() error { return kr.RemoveKey(key) }, func() error { return kr.AddKey(key) }
	default:
		return nil, fmt.Errorf("%w: op %q: want install, use or remove", ErrKeyring, op)
	}
	if err := do(); err != nil {
		return nil, fmt.Errorf("%w: %s %s: %v", ErrKeyring, op, fp, err)
	}
	if file != "" {
		if err := WriteKeyFile(file, orderedKeys(kr.GetPrimaryKey(), kr.GetKeys())); err != nil {
			if uerr := undo(); uerr != nil {
				m.log.Error("gossip keyring: undoing a change the key file could not record failed", "op", op, "key", fp, "err", uerr)
			}
			return nil, fmt.Errorf("gossip key file: %w", err)
		}
	}
	m.log.Info("gossip keyring changed", "op", op, "key", fp, "persisted", file != "")
	return keyInfos(kr.GetPrimaryKey(), kr.GetKeys()), nil
}

func (m *Membership) keyringReady() error {
	switch {
	case m.closed:
		return ErrClosed
	case !m.started:
		return ErrNotStarted
	case m.keyring == nil:
		return fmt.Errorf("%w: gossip encryption is off on this node (start it with --gossip-key-file)", ErrKeyring)
	}
	return nil
}

func orderedKeys(primary []byte, keys [][]byte) [][]byte {
	out := [][]byte{primary}
	for _, k := range keys {
		if !bytes.Equal(k, primary) {
			out = append(out, k)
		}
	}
	return out
}

func keyInfos(primary []byte, keys [][]byte) []KeyInfo {
	var out []KeyInfo
	for _, k := range orderedKeys(primary, keys) {
		out = append(out, KeyInfo{Fingerprint: Fingerprint(k), Primary: bytes.Equal(k, primary)})
	}
	return out
}

// WriteKeyFile writes keys (the first is the primary) to path in the
// LoadKeyFile format, atomically: a temporary file in the same directory,
// mode 0600, synced, then renamed over path.
func WriteKeyFile(path string, keys [][]byte) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# fusebox gossip keys, written by `fusebox admin keyring` at %s.\n# The first key encrypts; every key decrypts.\n", time.Now().UTC().Format(time.RFC3339))
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k))
		b.WriteByte('\n')
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: no such file
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
