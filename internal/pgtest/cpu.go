package pgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CPUOf is s.CPU for a benchmark: 0 without a server (the Raft store),
// and a failed read fails tb.
func CPUOf(tb testing.TB, s *Server) time.Duration {
	tb.Helper()
	if s == nil {
		return 0
	}
	d, err := s.CPU()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// CPU is the CPU time (user + system) the server has used so far: the
// postmaster's, its reaped children's and its live children's (backends,
// WAL writer, checkpointer…), from /proc (Linux). Benchmarks report the
// database's CPU per task with it.
func (s *Server) CPU() (time.Duration, error) {
	raw, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("pgtest: postmaster.pid: %w", err)
	}
	// The postmaster with its reaped children (utime, stime, cutime, cstime).
	ticks, _, err := procTicks(pid, 4)
	if err != nil {
		return 0, err
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		child, err := strconv.Atoi(filepath.Base(p))
		if err != nil || child == pid {
			continue
		}
		t, ppid, err := procTicks(child, 2)
		if err == nil && ppid == pid {
			ticks += t
		}
	}
	return time.Duration(ticks) * time.Second / 100, nil // USER_HZ
}

// procTicks sums the first n of utime, stime, cutime, cstime of pid, and
// returns its parent.
func procTicks(pid, n int) (ticks int64, ppid int, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("pgtest: unreadable /proc stat")
	}
	// After the command: state (field 3), ppid (4), … utime (14), stime,
	// cutime, cstime (17).
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, errors.New("pgtest: short /proc stat")
	}
	ppid, _ = strconv.Atoi(f[1])
	for k := range n {
		v, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		ticks += v
	}
	return ticks, ppid, nil
}
