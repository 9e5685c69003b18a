package cluster

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// validKeyLen accepts AES-128, AES-192 and AES-256 key sizes.
func validKeyLen(n int) error {
	switch n {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("key is %d bytes, want 16, 24 or 32", n)
}

// LoadKeyFile reads gossip keys from path: one base64 key per line, blank
// lines and lines starting with # ignored. The first key is the primary
// (used to encrypt); the others are accepted for decryption during a
// rotation. Each must decode to 16, 24 or 32 bytes.
func LoadKeyFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading gossip key file: %w", err)
	}
	keys, err := ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip key file %s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys parses the key file format of LoadKeyFile.
func ParseKeys(data []byte) ([][]byte, error) {
	var keys [][]byte
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: not base64: %w", line, err)
		}
		if err := validKeyLen(len(key)); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if prev, dup := seen[string(key)]; dup {
			return nil, fmt.Errorf("line %d: duplicate of the key on line %d", line, prev)
		}
		seen[string(key)] = line
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, nil
}

// UseKeys installs a new keyring live: every key in keys is accepted,
// keys[0] becomes the primary and installed keys not in keys are removed.
// Encryption must have been enabled at Start (it cannot be turned on or off
// live).
func (m *Membership) UseKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return errors.New("cluster: UseKeys: no keys")
	}
	for i, k := range keys {
		if err := validKeyLen(len(k)); err != nil {
			return fmt.Errorf("cluster: UseKeys: keys[%d]: %w", i, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if !m.started {
		return ErrNotStarted
	}
	if len(m.cfg.Keys) == 0 {
		return errors.New("cluster: UseKeys: gossip encryption was not enabled at start (no Keys)")
	}
	// Our memberlist config holds the keyring; memberlist reads it per packet.
	kr := m.keyring
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("cluster: UseKeys: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("cluster: UseKeys: %w", err)
	}
	keep := map[string]bool{}
	for _, k := range keys {
		keep[string(k)] = true
	}
	for _, k := range kr.GetKeys() {
		if !keep[string(k)] {
			if err := kr.RemoveKey(k); err != nil {
				return fmt.Errorf("cluster: UseKeys: %w", err)
			}
		}
	}
	m.log.Info("gossip keyring updated", "keys", len(keys))
	return nil
}
