package main

import (
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
	"syscall"
	"time"

	"fusebox/internal/localproc"
)

// killTimeout bounds the wait for an exit after SIGKILL.
const killTimeout = 10 * time.Second

// errAddrInUse marks a node that exited because a port it was given was
// taken between allocation and bind; it is relaunched on new ports.
var errAddrInUse = errors.New("address already in use")

// nodeProc is one `fusebox serve` child process. Its reaper goroutine is
// owned by the run it reaps and ends when the process exits; every run is
// killed by stop/kill, and by the kernel (Pdeathsig) if the demo dies.
type nodeProc struct {
	id         string
	bin        string
	dataDir    string
	logPath    string
	httpAddr   string
	gossipAddr string
	raftAddr   string
	join       []string
	expect     int
	// extra are flags beyond the defaults (--secure's TLS and tokens);
	// scheme is http or https.
	extra  []string
	scheme string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the current run is reaped
	waitErr error
	pids    []int // every pid this node ran as
}

func newNodeProc(id, bin, dir string, expect int) (*nodeProc, error) {
	p := &nodeProc{
		id:      id,
		bin:     bin,
		dataDir: filepath.Join(dir, id, "data"),
		logPath: filepath.Join(dir, id+".log"),
		expect:  expect,
		scheme:  "http",
	}
	return p, p.assignPorts()
}

func (p *nodeProc) assignPorts() error {
	var err error
	if p.httpAddr, err = freeAddr(false); err != nil {
		return err
	}
	if p.gossipAddr, err = freeAddr(true); err != nil {
		return err
	}
	p.raftAddr, err = freeAddr(false)
	return err
}

func (p *nodeProc) args() []string {
	args := []string{"serve",
		"--node-id", p.id,
		"--data-dir", p.dataDir,
		"--http-addr", p.httpAddr,
		"--gossip-addr", p.gossipAddr,
		"--raft-addr", p.raftAddr,
		"--bootstrap-expect", strconv.Itoa(p.expect),
		"--timing", "fast",
		"--log-level", "info",
		"--shutdown-timeout", "10s",
	}
	if len(p.join) > 0 {
		args = append(args, "--join", strings.Join(p.join, ","))
	}
	return append(args, p.extra...)
}

// launch starts the process without waiting for it to be ready.
func (p *nodeProc) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("%s: already running", p.id)
	}
	if err := os.MkdirAll(p.dataDir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	args := p.args()
	fmt.Fprintf(logf, "==== demo: %s %s\n", p.bin, strings.Join(args, " "))
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.id, p.bin, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.waitErr = cmd, exited, nil
	p.pids = append(p.pids, cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

func (p *nodeProc) runningLocked() bool {
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

func (p *nodeProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Pids returns every pid this node ran as.
func (p *nodeProc) Pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.pids...)
}

// waitReady polls /readyz until it answers 200, the process exits or ctx
// ends; the error carries the log tail.
func (p *nodeProc) waitReady(ctx context.Context, hc *http.Client) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		code, err := get(ctx, hc, p.scheme+"://"+p.httpAddr+"/readyz")
		switch {
		case err == nil && code == http.StatusOK:
			return nil
		case ctx.Err() != nil:
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("HTTP %d", code)
		}
		select {
		case <-exited:
			tail := p.logTail(20)
			err := fmt.Errorf("%s exited before it was ready (%v); log %s ends:\n%s", p.id, p.exitErr(), p.logPath, tail)
			if strings.Contains(tail, "address already in use") {
				return fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last /readyz: %s): %w; log %s ends:\n%s", p.id, last, ctx.Err(), p.logPath, p.logTail(20))
		case <-tick.C:
		}
	}
}

func get(ctx context.Context, hc *http.Client, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (p *nodeProc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// stop sends SIGTERM and waits up to timeout for the exit, then SIGKILLs.
// A node that is not running is not an error.
func (p *nodeProc) stop(timeout time.Duration) error {
	p.mu.Lock()
	if !p.runningLocked() {
		p.mu.Unlock()
		return nil
	}
	exited := p.exited
	err := p.cmd.Process.Signal(syscall.SIGTERM)
	p.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return p.kill()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-exited:
		if err := p.exitErr(); err != nil {
			return fmt.Errorf("%s: exit after SIGTERM: %w", p.id, err)
		}
		return nil
	case <-t.C:
	}
	if err := p.kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s: still running %v after SIGTERM; killed", p.id, timeout)
}

// kill sends SIGKILL and waits for the exit.
func (p *nodeProc) kill() error {
	p.mu.Lock()
	if !p.runningLocked() {
		p.mu.Unlock()
		return nil
	}
	exited := p.exited
	_ = p.cmd.Process.Kill()
	p.mu.Unlock()
	t := time.NewTimer(killTimeout)
	defer t.Stop()
	select {
	case <-exited:
		return nil
	case <-t.C:
		return fmt.Errorf("%s: no exit %v after SIGKILL", p.id, killTimeout)
	}
}

// logTail returns the last n lines of the node's log.
func (p *nodeProc) logTail(n int) string { return localproc.LogTail(p.logPath, n) }

// freeAddr finds a free loopback port (TCP, and UDP on the same port for
// gossip). Nothing is reserved: another process can take it before the node
// binds, which launchCluster handles.
func freeAddr(udpToo bool) (string, error) { return localproc.FreeAddr("127.0.0.1", udpToo) }
