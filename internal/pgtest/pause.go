package pgtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Pause stops the server and every one of its processes with SIGSTOP:
// connections stay open and statements hang, as behind a wedged host or a
// black-holed route, where StopImmediate refuses them at once. Resume
// continues them.
func (s *Server) Pause() error { return s.signalAll(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signalAll(syscall.SIGCONT) }

// signalAll sends sig to the postmaster and its children (backends and
// background workers), children first on SIGSTOP so none is left running
// to notice the postmaster stop.
func (s *Server) signalAll(sig syscall.Signal) error {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("pgtest: postmaster.pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return fmt.Errorf("pgtest: postmaster.pid: %q: %w", line, err)
	}
	pids := append(childrenOf(pm), pm)
	if sig == syscall.SIGCONT {
		pids = append([]int{pm}, pids[:len(pids)-1]...)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("pgtest: signal %v to %d: %w", sig, pid, err)
		}
	}
	return nil
}

// childrenOf lists the processes whose parent is pid (/proc).
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so cut at the last ')'.
		i := bytes.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) > 1 {
			if pp, _ := strconv.Atoi(f[1]); pp == pid {
				out = append(out, p)
			}
		}
	}
	return out
}
