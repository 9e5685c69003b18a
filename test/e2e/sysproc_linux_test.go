//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

// sysProcAttr makes the kernel SIGKILL a node if this test binary dies, so
// no run can outlive the test even when cleanup never happens. (The signal
// is tied to the forking OS thread; the Go runtime does not retire threads
// that did not LockOSThread, so in practice it is the test process.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// allThreadsStopped reports whether every thread of pid is in the stopped
// state ('T'), i.e. a SIGSTOP has fully taken effect.
func allThreadsStopped(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, err
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false, err
		}
		// pid (comm) state …: comm may hold spaces; the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("unexpected /proc stat: %q", b)
		}
		if s := b[i+2]; s != 'T' && s != 't' {
			return false, nil
		}
	}
	return true, nil
}
