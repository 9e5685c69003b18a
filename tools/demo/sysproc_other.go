//go:build !linux

package main

import "syscall"

// sysProcAttr: without Pdeathsig (Linux only) a node outlives a demo that
// is killed without tearing down; Ctrl-C and panics still tear down.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
