//go:build unix

package node

import "syscall"

// statFree returns the bytes available to unprivileged users on dir's file
// system.
func statFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
