package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const nodeIDFile = "node-id"

// claimDataDir creates the data dir and binds it to this node id: a data dir
// written by another node holds that node's Raft identity, and reusing it
// under a new name would make the cluster see one server twice.
func claimDataDir(dir, nodeID string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
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
