package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
	}))
}

// binDir holds the node binary the tests build (removed after the tests).
var binDir string

// buildFusebox builds the node binary once per test binary.
var buildFusebox = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "demo-test-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "fusebox")
	out, err := exec.Command("go", "build", "-o", bin, "fusebox/cmd/node").CombinedOutput()
	if err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

func fuseboxBin(t *testing.T) string {
	t.Helper()
	bin, err := buildFusebox()
	if err != nil {
		t.Fatalf("go build fusebox/cmd/node: %v", err)
	}
	return bin
}

// TestDemoHeadless runs the whole demo without a terminal for a short,
// bounded time with a short outage, and checks its summary: the cluster
// came up, healthy got its tasks, the outage was seen by the breakers and
// measured, and nothing is left running or on disk.
//
// With --secure the same run goes over HTTPS with mutual-TLS Raft, named
// tokens and gossip encryption.
func TestDemoHeadless(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "secure"}[secure], func(t *testing.T) { testDemoHeadless(t, secure) })
	}
}

func testDemoHeadless(t *testing.T, secure bool) {
	bin := fuseboxBin(t)
	cfg := DefaultConfig()
	cfg.Bin = bin
	cfg.Secure = secure
	cfg.Duration = 18 * time.Second
	cfg.OutageAt = 3 * time.Second
	cfg.OutageFor = 7 * time.Second
	cfg.BreakerTimeout = 2 * time.Second
	cfg.ThrottleAt = 11 * time.Second // after the outage: 429 for 3 s
	cfg.RetryAfter = 3 * time.Second
	cfg.FleetRPS = 15 // under the 20 tasks/s submitted for healthy
	cfg.HealthInterval = time.Second

	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	sum, err := run(ctx, cfg, &out, false)
	t.Logf("demo ran %v; output:\n%s%s", time.Since(start).Round(time.Millisecond), out.String(), sum)
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	if sum.NodesReady != cfg.Nodes || len(sum.Nodes) != cfg.Nodes {
		t.Errorf("%d of %d nodes came up (%d listed)", sum.NodesReady, cfg.Nodes, len(sum.Nodes))
	}
	if sum.Submitted[destHealthy] == 0 || sum.Delivered[destHealthy] == 0 {
		t.Errorf("healthy: submitted %d, delivered %d; want both > 0", sum.Submitted[destHealthy], sum.Delivered[destHealthy])
	}
	if sum.Delivered[destHealthy] > sum.Submitted[destHealthy] {
		t.Errorf("healthy delivered %d distinct tasks, more than the %d submitted", sum.Delivered[destHealthy], sum.Submitted[destHealthy])
	}
	if sum.Tasks == nil || sum.Tasks["succeeded"] == 0 {
		t.Errorf("tasks by status = %v (%s); want some succeeded", sum.Tasks, sum.TasksErr)
	}
	if sum.SubmitFailed != 0 {
		t.Errorf("%d tasks were not accepted by any node", sum.SubmitFailed)
	}

	o := sum.Outage
	if o.Phase != phaseOver {
		t.Errorf("outage phase %q, want %q", o.Phase, phaseOver)
	}
	if !sum.BreakerOpened() {
		t.Errorf("no flaky breaker opened: transitions %v, events %v", sum.Transitions, sum.Events)
	}
	if o.Calls <= 0 || o.NodesCalling == 0 {
		t.Errorf("outage: %d failed calls from %d nodes; the breakers must have seen failures", o.Calls, o.NodesCalling)
	}
	// Refusing, the server handles only requests on a connection accepted
	// just before the switch; each of those failed too.
	if o.Received > o.Calls {
		t.Errorf("flaky's server handled %d requests while refusing, more than the %d failed calls", o.Received, o.Calls)
	}
	if o.Estimate <= 0 || !strings.Contains(o.Formula, "failures to trip") {
		t.Errorf("estimate %d (%q)", o.Estimate, o.Formula)
	}
	// Each opening is traced to where it came from, from the nodes' own
	// timelines: as many as the nodes' counters saw (a node's ring holds
	// its last 200 transitions, far more than this run makes), give or take
	// one per node opening between the two reads.
	opened := 0
	for _, n := range sum.Trips {
		for _, o := range tripOrigins {
			opened += n.Counts[o]
		}
	}
	want := 0
	for k, n := range sum.Transitions {
		if strings.HasPrefix(k, destFlaky+" ") && strings.HasSuffix(k, "→open") {
			want += n
		}
	}
	if opened == 0 || opened > want+cfg.Nodes || opened < want-cfg.Nodes {
		t.Errorf("trips traced %d flaky openings (%+v), the nodes' counters %d", opened, sum.Trips, want)
	}
	if !strings.Contains(out.String(), " | trips n") || !strings.Contains(sum.String(), "flaky opened:") {
		t.Error("neither the status lines nor the summary say where the flaky openings came from")
	}
	if sum.Transitions[destFlaky+" closed→open"] == 0 {
		t.Errorf("no closed→open transition of flaky in the nodes' counters: %v", sum.Transitions)
	}

	checkFleetTrace(t, cfg, sum, out.String())

	// One line a second, the outage visible in them.
	lines := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "t+") {
			lines++
		}
	}
	if lines < 10 {
		t.Errorf("%d status lines for a %v run; want about one a second", lines, cfg.Duration)
	}
	if !strings.Contains(out.String(), "outage down") || !strings.Contains(out.String(), "flaky refuse") {
		t.Error("the status lines never showed flaky down")
	}
	if secure && (!strings.Contains(out.String(), "secure: HTTPS API and mutual-TLS Raft") || !strings.Contains(out.String(), "https://")) {
		t.Error("--secure: the output does not say the cluster runs with TLS and tokens")
	}
	text := sum.String()
	for _, want := range []string{"3 of 3 came up", "all stopped cleanly", "ESTIMATE", "calls that reached the dead destination"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q", want)
		}
	}

	// Nothing left behind.
	if len(sum.LeftRunning) > 0 || sum.StopErr != "" {
		t.Errorf("teardown: left running %v, stop errors %q", sum.LeftRunning, sum.StopErr)
	}
	for _, n := range sum.Nodes {
		if len(n.Pids) == 0 {
			t.Errorf("%s: no pid recorded", n.ID)
		}
		for _, pid := range n.Pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("%s: pid %d still exists (kill 0: %v)", n.ID, pid, err)
			}
		}
	}
	if _, err := os.Stat(sum.Dir); !sum.DirRemoved || !os.IsNotExist(err) {
		t.Errorf("temp dir %s: removed %v, stat %v", sum.Dir, sum.DirRemoved, err)
	}
}

// checkFleetTrace checks the fleet features' trace from the real run:
// every node held flaky until the deadline its 429 gave (Retry-After), the
// destination was called about once per node meanwhile; healthy's budget
// was shared and held; flaky's health checks ran during the outage.
func checkFleetTrace(t *testing.T, cfg Config, sum *Summary, out string) {
	t.Helper()
	th := sum.Fleet.Throttle
	if th.Phase != throttleOver || th.Received == 0 || th.TotalCalls == 0 {
		t.Errorf("429 phase %q: flaky answered %d × 429, the nodes counted %d calls; want over and both > 0", th.Phase, th.Received, th.TotalCalls)
	}
	if len(th.Until) != cfg.Nodes {
		t.Errorf("held by Retry-After: %v; want every one of the %d nodes", th.Until, cfg.Nodes)
	}
	// The deadline is the first 429's arrival plus Retry-After, which the
	// peers adopt through gossip: one deadline for the fleet. (A node that
	// got its own 429 before the gossip arrived has one a few ms apart.)
	end := cfg.ThrottleAt + cfg.RetryAfter
	for n, u := range th.Until {
		if u < end-time.Second || u > end+5*time.Second {
			t.Errorf("%s held until %s; want about %s (the phase's start plus Retry-After)", n, fmtT(u), fmtT(end))
		}
	}
	if th.Spread() > time.Second {
		t.Errorf("the nodes' deadlines are %v apart (%v); want one fleet-wide deadline", th.Spread(), th.Until)
	}
	// Target ≤ 1 call per node; calls already in flight when the first
	// 429 came back may add a few.
	if th.TotalCalls > 3*cfg.Nodes {
		t.Errorf("%d calls reached flaky during the hold (%v); the hold did not stop them", th.TotalCalls, th.Calls)
	}

	bd := sum.Fleet.Budget
	if bd.BudgetRPS != cfg.FleetRPS || len(bd.Nodes) == 0 {
		t.Errorf("fleet budget %+v: no node reported a share of healthy's %v/s", bd, cfg.FleetRPS)
	}
	for _, n := range bd.Nodes {
		if n.Share <= 0 || n.Share > 1 {
			t.Errorf("%s's share of the budget is %v", n.Node, n.Share)
		}
	}
	// The budget holds: healthy is called at about 15/s although 20/s are
	// submitted (a busy machine only lowers the rate).
	if bd.MeasuredRPS <= 0 || bd.MeasuredRPS > 1.3*cfg.FleetRPS {
		t.Errorf("healthy measured %.1f/s over %v; want (0, %.1f] under a budget of %v/s", bd.MeasuredRPS, bd.Window, 1.3*cfg.FleetRPS, cfg.FleetRPS)
	}

	h := sum.Fleet.Health
	if len(h.Last) == 0 || h.ChecksInOutage == 0 {
		t.Errorf("health checks: last %v, %d during the outage; want some", h.Last, h.ChecksInOutage)
	}
	for n, l := range h.Last {
		switch l.Result {
		case "pass", "fail", "error":
		default:
			t.Errorf("%s's last health check %+v", n, l)
		}
	}

	for _, want := range []string{"| 429 over: held n", "| budget 15/s measured", "| health n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the status lines never show %q", want)
		}
	}
	text := sum.String()
	for _, want := range []string{"retry-after:  flaky answered 429 (Retry-After 3s)", "fleet budget: healthy 15/s: measured", "health:       flaky checked every 1s"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}

// TestDemoNodeFailsToStart: a binary that exits at once must end the demo
// with an error naming the node, and tear down what was started.
func TestDemoNodeFailsToStart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Bin = "/bin/false"
	if _, err := os.Stat(cfg.Bin); err != nil {
		t.Skip("no /bin/false")
	}
	cfg.ReadyTimeout = 20 * time.Second
	var out bytes.Buffer
	sum, err := run(context.Background(), cfg, &out, false)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("run: %v, want a node that exited before it was ready", err)
	}
	if sum.NodesReady != 0 || len(sum.LeftRunning) != 0 || !sum.DirRemoved {
		t.Errorf("summary: ready %d, left running %v, dir removed %v", sum.NodesReady, sum.LeftRunning, sum.DirRemoved)
	}
	if !strings.Contains(sum.String(), "stopped early") {
		t.Errorf("summary does not say the demo stopped early:\n%s", sum)
	}
}

// TestDemoStopsOnCancel: cancelling (what Ctrl-C does) while nodes are
// starting ends the run promptly and leaves nothing running.
func TestDemoStopsOnCancel(t *testing.T) {
	bin := fuseboxBin(t)
	cfg := DefaultConfig()
	cfg.Bin = bin
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	type result struct {
		sum *Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := run(ctx, cfg, &out, false)
		done <- result{sum, err}
	}()
	testwait.For(t, 30*time.Second, "the condition", func() bool { return strings.Contains(out.String(), "started n1") })
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("run did not return within 60s of the cancel")
	}
	if r.sum == nil {
		t.Fatalf("no summary (err %v)", r.err)
	}
	if len(r.sum.LeftRunning) > 0 {
		t.Errorf("left running after cancel: %v", r.sum.LeftRunning)
	}
	if len(r.sum.Nodes) == 0 || len(r.sum.Nodes[0].Pids) == 0 {
		t.Fatalf("no node pid recorded: %+v", r.sum.Nodes)
	}
	for _, n := range r.sum.Nodes {
		for _, pid := range n.Pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("%s: pid %d still exists (kill 0: %v)", n.ID, pid, err)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
