//go:build !linux

package e2e

import "syscall"

// sysProcAttr: without Pdeathsig, t.Cleanup is the only guard against
// orphans on this platform.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// allThreadsStopped cannot look here; Pause trusts the signal.
func allThreadsStopped(int) (bool, error) { return true, nil }
