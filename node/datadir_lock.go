package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// dataDirLockFile is the file a running node holds locked in its data dir.
const dataDirLockFile = "LOCK"

// lockDataDir takes an exclusive, non-blocking lock on dir for as long as
// the returned file stays open. A second node started on a data dir in use
// waited for good inside the Raft store's bbolt lock, with nothing logged,
// its HTTP port bound but never served and SIGTERM ignored; now it stops
// at once and says which flag to change. The lock goes with the process,
// so a crashed node leaves none behind.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, dataDirLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data-dir %s is in use by another fusebox process: stop it, or give this one its own --data-dir", dir)
		}
		return nil, fmt.Errorf("--data-dir %s: lock %s: %w", dir, dataDirLockFile, err)
	}
	return f, nil
}
