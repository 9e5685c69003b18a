package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// newSingle prepares one node on fresh loopback ports (a one-node cluster).
func newSingle(t *testing.T) *Process {
	t.Helper()
	cfg := ProcessConfig{NodeID: "solo"}
	if err := assignPorts(&cfg, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	return NewProcess(t, cfg)
}

// startSingle starts it, retrying on a lost port race.
func startSingle(t *testing.T) *Process {
	t.Helper()
	for attempt := 0; ; attempt++ {
		p := newSingle(t)
		err := p.Start(context.Background())
		if err == nil {
			return p
		}
		if !errors.Is(err, errAddrInUse) || attempt == 3 {
			t.Fatal(err)
		}
	}
}

// runBin runs the binary to completion with a deadline and returns its
// combined output and exit code.
func runBin(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
		return "", -1
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}} {
		out, code := runBin(t, nil, args...)
		if code != 0 {
			t.Errorf("fusebox %v: exit %d, want 0; output:\n%s", args, code, out)
		}
		if !strings.Contains(out, "Usage:") {
			t.Errorf("fusebox %v: no usage in output:\n%s", args, out)
		}
	}
	out, _ := runBin(t, nil, "serve", "--help")
	for _, flag := range []string{"--node-id", "--data-dir", "--http-addr", "--gossip-addr", "--raft-addr", "--join", "--bootstrap-expect", "--timing"} {
		if !strings.Contains(out, flag) {
			t.Errorf("serve --help does not document %s", flag)
		}
	}
}

func TestBadFlagExitsNonZeroNamingIt(t *testing.T) {
	cases := []struct {
		args  []string
		env   []string
		names string
	}{
		{args: []string{"serve", "--no-such-flag"}, names: "--no-such-flag"},
		{args: []string{"serve", "--timing", "warp", "--data-dir", t.TempDir()}, names: "--timing"},
		{args: []string{"serve", "--bootstrap-expect", "many"}, names: "bootstrap-expect"},
		{args: []string{"serve", "--data-dir", t.TempDir()}, env: []string{"FUSEBOX_HTTP_ADDR=not-an-address"}, names: "--http-addr"},
		{args: []string{"serve", "--data-dir", t.TempDir()}, env: []string{"FUSEBOX_GC_HEAP_FLOOR_MB=-1"}, names: "--gc-heap-floor-mb"},
	}
	for _, c := range cases {
		out, code := runBin(t, c.env, c.args...)
		if code == 0 {
			t.Errorf("fusebox %v (env %v): exit 0, want non-zero; output:\n%s", c.args, c.env, out)
			continue
		}
		if !strings.Contains(out, c.names) {
			t.Errorf("fusebox %v (env %v): exit %d, output does not name %s:\n%s", c.args, c.env, code, c.names, out)
		}
	}
}

func TestStartReadyAndSIGTERMExitsZero(t *testing.T) {
	p := startSingle(t)
	if code, err := p.get(context.Background(), "/healthz"); err != nil || code != 200 {
		t.Fatalf("/healthz: %d, %v", code, err)
	}
	if code, err := p.get(context.Background(), "/metrics"); err != nil || code != 200 {
		t.Fatalf("/metrics: %d, %v", code, err)
	}
	begin := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v; log:\n%s", err, p.LogTail(30))
	}
	t.Logf("SIGTERM to exit 0: %v", time.Since(begin).Round(time.Millisecond))
	if _, err := p.get(context.Background(), "/healthz"); err == nil {
		t.Fatal("API still answers after the process exited")
	}
}

func TestEnvAddrs(t *testing.T) {
	p := newSingle(t)
	p.cfg.AddrsFromEnv = true // no address flags: FUSEBOX_*_ADDR only
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !p.LogContains("http://" + p.cfg.HTTPAddr) {
		t.Errorf("startup line does not show the address from FUSEBOX_HTTP_ADDR %s", p.cfg.HTTPAddr)
	}
}

func TestKillRestartKeepsDataDir(t *testing.T) {
	p := startSingle(t)
	id := filepath.Join(p.cfg.DataDir, "node-id")
	before, err := os.ReadFile(id)
	if err != nil {
		t.Fatalf("data dir has no node identity after start: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(id)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("node identity changed across SIGKILL+restart: %q → %q (%v)", before, after, err)
	}
	// The data dir is bound to its node: another id must be refused.
	other := p.cfg
	other.NodeID = "other"
	if err := assignPorts(&other, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	q := NewProcess(t, other)
	if err := q.Start(context.Background()); err == nil {
		t.Fatal("a second node id started on the same data dir")
	} else if !q.LogContains("--data-dir") {
		t.Fatalf("refusal does not name --data-dir: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestPauseResume(t *testing.T) {
	p := startSingle(t)
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if !p.Paused() {
		t.Fatal("not paused after SIGSTOP")
	}
	// A stopped process accepts connections (the kernel does) but answers
	// nothing: the request must time out.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	code, err := p.get(ctx, "/healthz")
	cancel()
	if err == nil {
		t.Fatalf("paused process answered /healthz with %d", code)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, 10*time.Second, "the resumed node to answer /readyz", func() error {
		code, err := p.get(context.Background(), "/readyz")
		if err != nil {
			return err
		}
		if code != 200 {
			return errors.New("not ready")
		}
		return nil
	})
	// SIGTERM reaches a paused process too (Stop sends SIGCONT after it).
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop of a paused process: %v", err)
	}
}
