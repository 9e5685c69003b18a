//go:build linux

package main

import "syscall"

// sysProcAttr makes the kernel SIGKILL a node if the demo dies without
// tearing down (a panic in a goroutine, SIGKILL). The signal is tied to the
// forking OS thread; the Go runtime does not retire threads that did not
// LockOSThread, so in practice it is the demo process.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
