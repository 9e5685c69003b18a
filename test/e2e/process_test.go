package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/localproc"
	"fusebox/internal/testwait"
)

// Deadlines of the harness: generous, because the machine is small and
// shared. Timing targets belong in the figures the tests log, not here.
const (
	readyTimeout = 45 * time.Second // Start: process up and /readyz 200
	// Stop: SIGTERM until exit, then SIGKILL. Above the node's own bound
	// (--shutdown-timeout, 30 s, plus serve's 5 s grace): the last node of
	// a cluster that lost quorum may spend its whole shutdown timeout
	// waiting for writes, and that is not a failure.
	stopTimeout  = 40 * time.Second
	killTimeout  = 10 * time.Second // exit after SIGKILL
	apiTimeout   = 5 * time.Second  // one API call (a paused node must not hang a test)
	logTailLines = 60
)

// errAddrInUse marks a start that failed because a port was taken between
// allocation and bind; the caller may pick new ports and try again.
var errAddrInUse = errors.New("address already in use")

// ProcessConfig is how one fusebox serve process is started. Restart reuses
// it unchanged: same data dir, same ports, same flags.
type ProcessConfig struct {
	NodeID          string
	DataDir         string
	HTTPAddr        string
	GossipAddr      string
	RaftAddr        string
	Join            []string
	BootstrapExpect int
	Timing          string // default "fast"
	LogLevel        string // default "debug"
	AdminToken      string // written to a token file when set
	// Tokens, when set, is the token file written instead (named tokens
	// with roles); AdminToken is still what the harness presents.
	Tokens    string
	ExtraArgs []string
	// Env is added to the inherited environment (KEY=VALUE).
	Env []string
	// Netns, when set, runs the process in that network namespace.
	Netns string
	// AddrsFromEnv passes the three addresses as FUSEBOX_HTTP_ADDR,
	// FUSEBOX_GOSSIP_ADDR and FUSEBOX_RAFT_ADDR instead of flags.
	AddrsFromEnv bool
	// TLS, when set, runs the node with TLS and a gossip key, and the
	// harness's client speaks HTTPS (tls_harness_test.go).
	TLS *ProcessTLS
	// Bin, when set, is the binary this process runs instead of the one
	// TestMain built (a build of an older release, say); Restart picks up
	// a change, so a test can upgrade a node in place.
	Bin string
}

// Process drives one real `fusebox serve` process.
type Process struct {
	t       testing.TB
	cfg     ProcessConfig
	logPath string
	hc      *http.Client

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current run has been reaped
	waitErr error
	paused  bool
	starts  int

	isolated atomic.Bool // cut off by a partition: not reachable, not live
}

// NewProcess prepares a process; nothing runs until Start. Its data dir and
// log live under t.TempDir(); every run is killed in t.Cleanup, and the log
// tail is printed if the test failed.
func NewProcess(t testing.TB, cfg ProcessConfig) *Process {
	t.Helper()
	dir := t.TempDir()
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(dir, "data")
	}
	if cfg.Timing == "" {
		cfg.Timing = "fast"
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "debug"
	}
	p := &Process{
		t:       t,
		cfg:     cfg,
		logPath: filepath.Join(dir, cfg.NodeID+".log"),
		hc: &http.Client{
			Timeout:   apiTimeout,
			Transport: localproc.Bearer{Token: cfg.AdminToken, Next: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second, TLSClientConfig: cfg.TLS.clientConfig()}},
		},
	}
	// Registered after t.TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		p.killQuietly()
		p.hc.CloseIdleConnections()
		if t.Failed() {
			t.Logf("---- %s: last %d log lines (%s) ----\n%s", cfg.NodeID, logTailLines, p.logPath, p.LogTail(logTailLines))
			p.keepLog()
		}
	})
	return p
}

// Name is the node id.
func (p *Process) Name() string { return p.cfg.NodeID }

// Config returns the process's configuration.
func (p *Process) Config() ProcessConfig { return p.cfg }

// HTTPAddr is the node's API address.
func (p *Process) HTTPAddr() string { return p.cfg.HTTPAddr }

// LogPath is the file holding the output of every run of this process.
func (p *Process) LogPath() string { return p.logPath }

// Client is an API client for this node, with a short per-call timeout.
func (p *Process) Client() *api.Client {
	return api.NewClient(p.baseURL(), p.cfg.AdminToken, p.hc)
}

// baseURL is http://addr, or https://addr with TLS.
func (p *Process) baseURL() string {
	if p.cfg.TLS != nil {
		return "https://" + p.cfg.HTTPAddr
	}
	return "http://" + p.cfg.HTTPAddr
}

// Running reports whether a run is live (possibly paused).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// SetIsolated marks the process as cut off by a network partition, so the
// cluster helpers neither call it nor count it as live.
func (p *Process) SetIsolated(v bool) { p.isolated.Store(v) }

// Isolated reports whether SetIsolated(true) is in force.
func (p *Process) Isolated() bool { return p.isolated.Load() }

// Paused reports whether the process is stopped by SIGSTOP.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.runningLocked()
}

func (p *Process) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *Process) args() ([]string, error) {
	c := p.cfg
	args := []string{"serve",
		"--node-id", c.NodeID,
		"--data-dir", c.DataDir,
		"--timing", c.Timing,
		"--log-level", c.LogLevel,
	}
	if !c.AddrsFromEnv {
		args = append(args, "--http-addr", c.HTTPAddr, "--gossip-addr", c.GossipAddr, "--raft-addr", c.RaftAddr)
	}
	if len(c.Join) > 0 {
		args = append(args, "--join", strings.Join(c.Join, ","))
	}
	if c.BootstrapExpect > 0 {
		args = append(args, "--bootstrap-expect", strconv.Itoa(c.BootstrapExpect))
	}
	if c.AdminToken != "" || c.Tokens != "" {
		content := c.Tokens
		if content == "" {
			content = c.AdminToken + "\n"
		}
		f := filepath.Join(filepath.Dir(p.logPath), c.NodeID+".token")
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--admin-token-file", f)
	}
	if c.TLS != nil {
		args = append(args, c.TLS.args()...)
	} else if c.Netns != "" {
		args = append(args, "--insecure") // a namespace's own IP is not loopback
	}
	return append(args, c.ExtraArgs...), nil
}

// Launch spawns the process without waiting for it to be ready (a cluster
// launches every node before any can be ready).
func (p *Process) Launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("%s: already running (pid %d)", p.cfg.NodeID, p.cmd.Process.Pid)
	}
	args, err := p.args()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	p.starts++
	bin := binPath
	if p.cfg.Bin != "" {
		bin = p.cfg.Bin
	}
	fmt.Fprintf(logf, "==== e2e: run #%d: %s %s\n", p.starts, bin, strings.Join(args, " "))
	var cmd *exec.Cmd
	if p.cfg.Netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.cfg.Netns, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	if p.cfg.AddrsFromEnv {
		cmd.Env = append(cmd.Env, "FUSEBOX_HTTP_ADDR="+p.cfg.HTTPAddr, "FUSEBOX_GOSSIP_ADDR="+p.cfg.GossipAddr, "FUSEBOX_RAFT_ADDR="+p.cfg.RaftAddr)
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", p.cfg.NodeID, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.waitErr, p.paused = cmd, exited, nil, false
	// The reaper: owned by this run, ends when the process exits (every
	// run is killed in t.Cleanup at the latest).
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// Start launches the process and waits until GET /readyz answers 200. It
// fails with the log tail if the process exits or is not ready in time.
func (p *Process) Start(ctx context.Context) error {
	if err := p.Launch(); err != nil {
		return err
	}
	return p.WaitReady(ctx)
}

// WaitReady polls /readyz until it answers 200, the process exits, ctx
// ends or readyTimeout passes.
func (p *Process) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return fmt.Errorf("%s: never launched", p.cfg.NodeID)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		code, err := p.get(ctx, "/readyz")
		switch {
		case err == nil && code == http.StatusOK:
			return nil
		case ctx.Err() != nil: // keep the last real answer
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("HTTP %d", code)
		}
		select {
		case <-exited:
			tail := p.LogTail(logTailLines)
			err := fmt.Errorf("%s exited before it was ready (%v); log tail:\n%s", p.cfg.NodeID, p.ExitErr(), tail)
			if strings.Contains(tail, "address already in use") {
				return fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last /readyz: %s): %w; log tail:\n%s", p.cfg.NodeID, last, ctx.Err(), p.LogTail(logTailLines))
		case <-tick.C:
		}
	}
}

func (p *Process) get(ctx context.Context, path string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.baseURL()+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// signal sends sig to the current run; it is an error if none is live.
func (p *Process) signal(sig syscall.Signal) (<-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return nil, fmt.Errorf("%s: not running", p.cfg.NodeID)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return nil, fmt.Errorf("%s: %v: %w", p.cfg.NodeID, sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL:
		p.paused = false
	}
	return p.exited, nil
}

// Stop sends SIGTERM (and SIGCONT, so a paused process can act on it) and
// waits stopTimeout for the exit, then SIGKILLs. It returns an error if the
// process had to be killed or exited non-zero.
func (p *Process) Stop() error {
	exited, err := p.signal(syscall.SIGTERM)
	if err != nil {
		return err
	}
	_, _ = p.signal(syscall.SIGCONT)
	select {
	case <-exited:
		if err := p.ExitErr(); err != nil {
			return fmt.Errorf("%s: exit after SIGTERM: %w", p.cfg.NodeID, err)
		}
		return nil
	case <-time.After(stopTimeout):
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s: still running %v after SIGTERM; killed", p.cfg.NodeID, stopTimeout)
}

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() error {
	exited, err := p.signal(syscall.SIGKILL)
	if err != nil {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("%s: no exit %v after SIGKILL", p.cfg.NodeID, killTimeout)
	}
}

// Pause stops the process with SIGSTOP and waits until every thread has
// stopped (the signal is asynchronous: a request could still be answered
// right after kill(2) returns).
func (p *Process) Pause() error {
	if _, err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := p.Pid()
	return testwait.Poll(killTimeout, func() error {
		ok, err := allThreadsStopped(pid)
		if err == nil && !ok {
			err = fmt.Errorf("%s (pid %d): not every thread stopped after SIGSTOP", p.cfg.NodeID, pid)
		}
		return err
	})
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error {
	_, err := p.signal(syscall.SIGCONT)
	return err
}

// Restart stops a live run gracefully, then starts again with the same data
// dir, ports and flags, and waits until ready. A port taken in between is
// retried for a while (TIME_WAIT is not a problem: Go sets SO_REUSEADDR).
func (p *Process) Restart(ctx context.Context) error {
	if p.Running() {
		if err := p.Stop(); err != nil {
			return err
		}
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = p.Start(ctx); err == nil || !errors.Is(err, errAddrInUse) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // back off before the same ports again
	}
	return err
}

// Wait waits up to d for the current run to exit and returns its error.
func (p *Process) Wait(d time.Duration) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return fmt.Errorf("%s: never launched", p.cfg.NodeID)
	}
	select {
	case <-exited:
		return p.ExitErr()
	case <-time.After(d):
		return fmt.Errorf("%s: still running after %v", p.cfg.NodeID, d)
	}
}

// ExitErr is the last run's exit error (nil while running or on exit 0).
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Pid is the current run's process id (0 if never launched).
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// killQuietly is the cleanup path: SIGKILL whatever runs and reap it.
func (p *Process) killQuietly() {
	if !p.Running() {
		return
	}
	if err := p.Kill(); err != nil {
		p.t.Errorf("cleanup: %v", err)
	}
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return localproc.LogTail(p.logPath, n) }

// keepLogsEnv names a directory a failed test's process logs are copied
// to, whole, before its temporary directory goes (the failure prints only
// their tails).
const keepLogsEnv = "FUSEBOX_E2E_KEEP_LOGS"

// keepLog copies the process's log to $FUSEBOX_E2E_KEEP_LOGS, if set, as
// <test>-<node>.log.
func (p *Process) keepLog() {
	dir := os.Getenv(keepLogsEnv)
	if dir == "" {
		return
	}
	b, err := os.ReadFile(p.logPath)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(p.t.Name()) + "-" + p.cfg.NodeID + ".log"
		err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err != nil {
		p.t.Logf("keeping %s's log: %v", p.cfg.NodeID, err)
	}
}

// LogContains reports whether the process's log contains s.
func (p *Process) LogContains(s string) bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(b, []byte(s))
}
