package main

import (
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/transport/transporttest"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP fusebox_breaker_requests_total Calls.
# TYPE fusebox_breaker_requests_total counter
fusebox_breaker_requests_total{destination="flaky",namespace="demo",outcome="failure",task_group="nexusoperations.Invocation"} 7
fusebox_breaker_requests_total{destination="flaky",namespace="demo",outcome="rejected",task_group="nexusoperations.Invocation"} 1.5e+01
fusebox_breaker_requests_total{destination="healthy",namespace="demo",outcome="failure",task_group="nexusoperations.Invocation"} 2 1700000000000
fusebox_breaker_requests_total{destination="we\"ird\\d,x=y",outcome="failure"} 4
fusebox_queue_depth{shard="3"} 5
fusebox_queue_depth{shard="4"} 6
fusebox_queue_depth_other 100
fusebox_breaker_requests_total{destination="broken 9
go_goroutines 12
`
	m, err := parseMetrics(strings.NewReader(text), metricBreakerRequests, metricQueueDepth)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.sum(metricQueueDepth, nil); got != 11 {
		t.Errorf("queue depth sum = %v, want 11", got)
	}
	if _, ok := m["go_goroutines"]; ok {
		t.Error("kept a metric that was not asked for")
	}
	if n := len(m[metricBreakerRequests]); n != 4 {
		t.Errorf("%d breaker request series, want 4 (the broken line skipped)", n)
	}
	c := flakyCounts(m)
	if c.failures != 7 || c.rejected != 15 {
		t.Errorf("flaky counts = %+v, want failures 7, rejected 15", c)
	}
	if got := m.sum(metricBreakerRequests, map[string]string{"destination": `we"ird\d,x=y`}); got != 4 {
		t.Errorf("escaped label value: sum %v, want 4", got)
	}
}

func TestPerHostEstimate(t *testing.T) {
	s := breakerpool.DefaultSettings()
	s.Timeout = breakerpool.Duration(5 * time.Second)
	cases := []struct {
		nodes   int
		elapsed time.Duration
		want    int
	}{
		{3, 30 * time.Second, 3 * (6 + 6)},
		{3, 4 * time.Second, 3 * 6}, // not a whole timeout yet: no probe
		{1, 11 * time.Second, 6 + 2},
		{0, time.Minute, 0},
	}
	for _, c := range cases {
		got, formula := perHostEstimate(c.nodes, c.elapsed, s)
		if got != c.want {
			t.Errorf("perHostEstimate(%d, %v) = %d (%s), want %d", c.nodes, c.elapsed, got, formula, c.want)
		}
	}
	s.MaxRequests, s.FailureThreshold = 2, 3
	if got, _ := perHostEstimate(2, 10*time.Second, s); got != 2*(3+2*2) {
		t.Errorf("MaxRequests 2, threshold 3: %d, want 14", got)
	}
}

func TestOutageAccounting(t *testing.T) {
	cfg := DefaultConfig()
	o := newOutage(cfg)
	if v := o.view(); v.Phase != phaseScheduled || v.Calls != 0 {
		t.Fatalf("before: %+v", v)
	}
	o.begin(10*time.Second, map[string]flakyCount{"n1": {failures: 4, rejected: 1}, "n2": {failures: 2}}, 100, 50)
	// n3 had no baseline (it did not answer): it counts from zero.
	o.update(15*time.Second, map[string]flakyCount{"n1": {failures: 10, rejected: 30}, "n3": {failures: 3}}, 100, 150)
	o.update(16*time.Second, map[string]flakyCount{"n2": {failures: 2}}, 100, 170) // n2 saw nothing
	o.finish(20*time.Second, map[string]flakyCount{"n1": {failures: 11, rejected: 40}}, 103, 250)
	v := o.view()
	if v.Phase != phaseOver || v.Elapsed != 10*time.Second {
		t.Fatalf("phase %q elapsed %v", v.Phase, v.Elapsed)
	}
	if v.Calls != 7+3 || v.Rejected != 39 || v.NodesCalling != 2 {
		t.Errorf("calls %d rejected %d nodes %d; want 10, 39, 2", v.Calls, v.Rejected, v.NodesCalling)
	}
	if v.PerNode["n1"] != 7 || v.PerNode["n2"] != 0 || v.PerNode["n3"] != 3 {
		t.Errorf("calls by node %v; want n1 7, n2 0, n3 3", v.PerNode)
	}
	if v.Received != 3 || v.TasksSubmitted != 200 {
		t.Errorf("received %d submitted %d; want 3, 200", v.Received, v.TasksSubmitted)
	}
	if want, _ := perHostEstimate(2, 10*time.Second, o.settings); v.Estimate != want || want != 2*(6+2) {
		t.Errorf("estimate %d, want %d", v.Estimate, want)
	}
	o.update(30*time.Second, map[string]flakyCount{"n1": {failures: 99}}, 999, 999)
	if !reflect.DeepEqual(o.view(), v) {
		t.Error("an update after the outage changed its figures")
	}
	if v := newOutage(Config{OutageFor: 0}).view(); v.Phase != phaseNone {
		t.Errorf("no outage configured: phase %q", v.Phase)
	}
}

func TestConfigValidateNamesTheFlag(t *testing.T) {
	cases := map[string]func(*Config){
		"--nodes":           func(c *Config) { c.Nodes = 0 },
		"--rate":            func(c *Config) { c.Rate = 0 },
		"--duration":        func(c *Config) { c.Duration = -time.Second },
		"--outage-mode":     func(c *Config) { c.OutageMode = "explode" },
		"--breaker-timeout": func(c *Config) { c.BreakerTimeout = 0 },
		"--hint-policy":     func(c *Config) { c.HintPolicy = "maybe" },
		"--refresh":         func(c *Config) { c.Refresh = time.Millisecond },
		"--retry-after":     func(c *Config) { c.RetryAfter = 1500 * time.Millisecond },
		"--throttle-at":     func(c *Config) { c.ThrottleAt = 20 * time.Second }, // inside the outage [10s, 40s)
		"--fleet-rps":       func(c *Config) { c.FleetRPS = -1 },
		"--health-interval": func(c *Config) { c.HealthInterval = time.Millisecond },
	}
	for flag, mod := range cases {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: Validate() = %v", flag, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	c, err := parseFlags([]string{"--duration", "90s", "--hint-policy", "off", "--outage-for", "0", "--throttle-at", "5s",
		"--retry-after", "3s", "--fleet-rps", "7.5", "--health-interval", "0"}, io.Discard)
	if err != nil || c.Duration != 90*time.Second || c.HintPolicy != "off" || c.OutageFor != 0 ||
		c.ThrottleAt != 5*time.Second || c.RetryAfter != 3*time.Second || c.FleetRPS != 7.5 || c.HealthInterval != 0 {
		t.Errorf("parseFlags = %+v, %v", c, err)
	}
	if _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Error("a stray argument was accepted")
	}
}

func TestWorkloadPacing(t *testing.T) {
	w := newWorkload(nil, 20, nil)
	if b := w.next(500 * time.Millisecond); len(b) != 20 { // 10 per destination
		t.Fatalf("first half second: %d tasks, want 20", len(b))
	}
	if b := w.next(time.Second); len(b) != 20 {
		t.Fatalf("second half second: %d tasks, want 20", len(b))
	}
	// A stall of 10 s is not made up in one burst: at most a second's worth.
	b := w.next(11 * time.Second)
	if len(b) != 2*21 {
		t.Fatalf("after a stall: %d tasks, want 42", len(b))
	}
	ids := map[string]bool{}
	for _, task := range b {
		if ids[task.RequestID] || task.RequestID == "" {
			t.Fatalf("request id %q repeated or empty", task.RequestID)
		}
		ids[task.RequestID] = true
		if task.Request.Service != transporttest.Service || task.Request.Operation != transporttest.OpEcho {
			t.Fatalf("task calls %s/%s", task.Request.Service, task.Request.Operation)
		}
	}
	if b := w.next(11 * time.Second); len(b) != 0 {
		t.Errorf("nothing owed, yet %d tasks", len(b))
	}
}

// TestDeliveriesCountsDistinctAndDuplicates drives a real destination.
func TestDeliveriesCountsDistinctAndDuplicates(t *testing.T) {
	dst := transporttest.NewDestination(t)
	d := newDeliveries(dst)
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	start := func(id string) {
		req, _ := http.NewRequest(http.MethodPost, dst.NexusURL()+"/"+transporttest.Service+"/"+transporttest.OpEcho, bytes.NewReader([]byte(`{}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Nexus-Request-Id", id)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	start("a")
	start("b")
	d.update()
	start("a") // a redelivery
	if err := dst.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	start("c") // 503: received, not delivered
	d.update()
	d.update() // idempotent
	if d.received != 4 || d.down != 1 || d.Delivered() != 2 || d.dups != 1 {
		t.Errorf("received %d (down %d) delivered %d dups %d; want 4 (1), 2, 1", d.received, d.down, d.Delivered(), d.dups)
	}
}

func TestRender(t *testing.T) {
	s := snapshot{
		At:     12 * time.Second,
		Leader: "n1",
		Nodes: []nodeView{
			{ID: "n1", HTTPAddr: "127.0.0.1:1", Running: true, Gossip: "alive", Role: "voter", State: "Leader", Leader: true, Shards: 6},
			{ID: "n2", Running: false, Gossip: "dead", Role: "voter", Err: "process exited"},
		},
		Breakers: []breakerView{
			{Node: "n1", Destination: destFlaky, State: "open", Source: "local", Mode: "auto", OpenRemainingSeconds: 3.5},
			{Node: "n2", Destination: destFlaky, State: "closed", Source: "hint", Mode: "guarded"},
			{Node: "n3", Destination: destFlaky, State: "closed", Source: "hint", Mode: "auto",
				Ramp: &api.BreakerRamp{StartRPS: 3.3, RPS: 12.5, TargetRPS: 100, Until: time.Now().Add(time.Hour)}},
		},
		Dests:   []destView{{Name: destHealthy, Mode: "up", PerSec: 20, Delivered: 240}, {Name: destFlaky, Mode: "refuse"}},
		Pending: 17,
		Outage:  outageView{Phase: phaseDown, Mode: "refuse", At: 10 * time.Second, For: 30 * time.Second, Elapsed: 2 * time.Second, Calls: 9, Estimate: 18, Formula: "2 nodes × …"},
		Events:  []event{{At: 11 * time.Second, Node: "n1", Dest: destFlaky, What: "closed→open (local)"}},
		Trips:   []nodeTrips{{Node: "n1", LastAt: 11 * time.Second, Origin: originLocal, Counts: map[string]int{originLocal: 1}}},
		Fleet: fleetView{
			Throttle: throttleView{Phase: throttleOn, At: 10 * time.Second, For: 8 * time.Second,
				Until: map[string]time.Duration{"n1": 18100 * time.Millisecond, "n2": 18200 * time.Millisecond}, Calls: map[string]int{"n1": 1, "n2": 0}, TotalCalls: 1},
			Budget: budgetView{BudgetRPS: 15, MeasuredRPS: 14.8, Window: 5 * time.Second,
				Nodes: []budgetNode{{Node: "n1", Share: 0.4, RPS: 6, Backlog: 12}}},
			Health: healthView{Interval: time.Second, ChecksInOutage: 28, Last: map[string]healthSeen{"n2": {At: 11500 * time.Millisecond, Result: "fail", Role: "owner"}}},
		},
	}
	frame := renderFrame(viewInfo{cfg: DefaultConfig(), dir: "/tmp/x"}, s)
	for _, want := range []string{"t+12.0s", "Timeout 5s", "Leader", "guarded", "3.5s", "DOWN (refuse)", "ESTIMATE", "18", "t+11.0s n1 flaky closed→open (local)", "/tmp/x", "pending tasks (all shards): 17", "12.5/s → 100/s",
		"reopens in", "WHY EACH NODE STOPPED CALLING flaky", "t+11.0s local failures", "█", "spared it 9 calls",
		"FLEET FEATURES", `429 "Retry-After: 8"`, "1 calls reached it in the hold", "deadlines within 0.1s", "t+18.1s", "healthy 15/s for the whole fleet",
		"measured 14.8/s over the last 5s", "40% = 6/s (backlog 12)", "0 tasks spent probing (target 0), 28 health checks", "t+11.5s fail (owner)"} {
		if !strings.Contains(frame, want) {
			t.Errorf("frame lacks %q:\n%s", want, frame)
		}
	}
	line := renderLine(s)
	for _, want := range []string{"t+12.0s nodes 1/2 leader n1", "healthy up 20.0/s (240)", "n1:open/local", "n2:closed/hint/guarded", "n3:closed/hint/ramp 12.5/s", "pending 17", "outage down: 9 calls (per-host estimate 18)", "trips n1:local-failures",
		"429 on: held n1:t+18.1s n2:t+18.2s, 1 calls", "budget 15/s measured 14.8/s over the last 5s n1:40%", "health n2:fail (outage: 0 task probes, 28 checks)"} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q: %s", want, line)
		}
	}
	for i, l := range strings.Split(frame, "\n") {
		if n := len([]rune(l)); n > 120 && !strings.Contains(l, "/tmp/x") {
			t.Errorf("frame line %d is %d columns (over 120): %q", i, n, l)
		}
	}
	var buf bytes.Buffer
	sc := newScreen(&buf, true)
	sc.show(viewInfo{cfg: DefaultConfig()}, s)
	if !strings.HasPrefix(buf.String(), ansiClearAll+ansiHome) || !strings.HasSuffix(buf.String(), ansiClearDown) {
		t.Errorf("terminal frame not framed by ANSI home/clear: %q…", buf.String()[:20])
	}
}
