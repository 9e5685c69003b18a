package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/node"
	"fusebox/raftstore/state"
	"fusebox/transport/transporttest"
	"fusebox/ui"
)

// TestStatusPageLabelsNumbersPlots drives the page (issue 16 §8) against a
// real three-node cluster with real traffic: a healthy and a failing
// callback destination, a breaker forced open for 10 minutes, a blocked
// task, a dead-lettered task, a recovery ramp, and finally one node that
// leaves (one whose departure keeps both destinations' calls in the
// remaining histories). It checks the labels ("reopens in", the gone
// node's mark, the guarded explanation, UTC times), the per-destination
// task counts, and that each plot is drawn from the nodes' real samples.
func TestStatusPageLabelsNumbersPlots(t *testing.T) {
	bin := chromium(t)
	nodes := startCluster(t, 3)
	hc := testHTTPClient(t)
	apic := api.NewClient(nodes[0].HTTPAddr(), "", hc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	up, down := transporttest.NewDestination(t), transporttest.NewDestination(t)
	if err := down.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		for _, d := range []*transporttest.Destination{up, down} {
			if _, err := apic.SubmitTask(ctx, callbackTo("ns-traffic", fmt.Sprintf("wf-%s-%d", d.Addr(), i), d.CallbackURL())); err != nil {
				t.Fatalf("submit to %s: %v", d.Addr(), err)
			}
		}
	}
	upKey, downKey := "http://"+up.Addr(), "http://"+down.Addr()

	// A destination that answers 429 with Retry-After: its breaker is held
	// open until then, and the cell says until when, in UTC.
	busy := transporttest.NewDestination(t)
	busy.SetRetryAfter("120")
	if err := busy.SetMode(transporttest.ModeTooManyRequests); err != nil {
		t.Fatal(err)
	}
	if _, err := apic.SubmitTask(ctx, callbackTo("ns-busy", "wf-busy", busy.CallbackURL())); err != nil {
		t.Fatal(err)
	}
	busyKey := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns-busy", Destination: "http://" + busy.Addr()}
	testwait.For(t, 30*time.Second, "a breaker held open by the destination's Retry-After", func() bool {
		var list api.BreakerList
		if apic.Do(ctx, http.MethodGet, "/v1/breakers", map[string][]string{"scope": {"cluster"}}, nil, &list) != nil {
			return false
		}
		for _, b := range list.Breakers {
			if b.Destination == busyKey.Destination && b.RetryAfterUntil != nil {
				return true
			}
		}
		return false
	})

	// A breaker forced open for 10 minutes: its cells say when it reopens.
	timed := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns-ui", Destination: "maintenance-api"}
	if err := apic.Do(ctx, http.MethodPost, "/v1/breakers/force", nil, api.BreakerForce{TaskGroup: timed.TaskGroup, Namespace: timed.NamespaceID,
		Destination: timed.Destination, Mode: "open", Duration: "10m", Reason: "ui test: maintenance"}, nil); err != nil {
		t.Fatal(err)
	}
	blockedID := submitBlockedTask(t, apic, nodes)
	dlqKey := deadLetterTask(t, apic)
	ramping := rampKey(t, apic, nodes)

	// Every node's history has sampled the traffic. Which node called which
	// destination depends on the shards (and on hints: a node a peer warned
	// may never call the failing one), so the node that leaves is one whose
	// departure keeps both destinations' calls in the remaining histories.
	var upOn, downOn map[string]uint64
	testwait.For(t, 30*time.Second, "the cluster history to hold both destinations' calls and three samples of every node", func() bool {
		var h ui.HistoryList
		if apic.Do(ctx, http.MethodGet, "/ui/api/history", map[string][]string{"scope": {"cluster"}}, nil, &h) != nil || len(h.Nodes) != 3 {
			return false
		}
		upOn, downOn = map[string]uint64{}, map[string]uint64{}
		for _, n := range h.Nodes {
			if len(n.Samples) < 3 {
				return false
			}
			for _, s := range n.Samples {
				for _, c := range s.Calls {
					if c.Destination == upKey && c.Calls > 0 {
						upOn[n.Node] += c.Calls
					}
					if c.Destination == downKey && c.Failures > 0 {
						downOn[n.Node] += c.Failures
					}
				}
			}
		}
		return len(upOn) > 0 && len(downOn) > 0
	})
	leave := -1
	for i := len(nodes) - 1; i >= 0 && leave < 0; i-- {
		id := fmt.Sprintf("n%d", i+1)
		if len(upOn)-boolInt(upOn[id] > 0) > 0 && len(downOn)-boolInt(downOn[id] > 0) > 0 {
			leave = i
		}
	}
	if leave < 0 {
		t.Fatalf("no node can leave with both destinations' calls kept: up %v, down failures %v", upOn, downOn)
	}
	goneID := fmt.Sprintf("n%d", leave+1)
	var stay []string
	var front *node.Node
	for i, nd := range nodes {
		if i != leave {
			stay = append(stay, fmt.Sprintf("n%d", i+1))
			if front == nil {
				front = nd
			}
		}
	}
	apic = api.NewClient(front.HTTPAddr(), "", hc)

	// It leaves: its column is marked, not blank.
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 20*time.Second)
	err := nodes[leave].Close(closeCtx)
	closeCancel()
	if err != nil {
		t.Fatalf("close %s: %v", goneID, err)
	}
	testwait.For(t, 30*time.Second, stay[0]+" to see "+goneID+" gone", func() bool {
		ms, err := apic.Members(ctx)
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.ID == goneID {
				return m.State == "left" || m.State == "dead"
			}
		}
		return false
	})

	page := "http://" + front.HTTPAddr() + "/ui/"
	dom := runChromium(t, bin, "--virtual-time-budget=8000", "--dump-dom", page)
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	checkLabels(t, doc, timed.String(), goneID, stay)
	checkRetryAfter(t, doc, busyKey.String())
	checkCounts(t, doc, blockedID, dlqKey)
	checkPlots(t, doc, upKey, downKey, ramping.String(), stay)
	if t.Failed() {
		t.Logf("dumped DOM:\n%s", tail(string(dom)))
	}
	screenshot(t, bin, page, "status-page-plots.png", "1400,2600")
}

// screenshot saves the page as name in $FUSEBOX_UI_SCREENSHOT_DIR (or the
// test's artifact dir) and checks it is an image of some size.
func screenshot(t *testing.T, bin, url, name, size string) {
	t.Helper()
	dir := os.Getenv("FUSEBOX_UI_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	shot, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	runChromium(t, bin, "--virtual-time-budget=8000", "--window-size="+size, "--screenshot="+shot, url)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v; want a PNG of the page", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}

func callbackTo(ns, wf, url string) api.TaskSubmit {
	return api.TaskSubmit{NamespaceID: ns, WorkflowID: wf, TaskGroup: breakerpool.TaskGroupCallback, Destination: url,
		Request: api.TaskRequest{Body: []byte("done"), ContentType: "text/plain"}}
}

// deadLetterTask submits a task to a refusing destination in a namespace
// that allows it, then narrows the namespace's allowlist: the next attempt
// dead-letters it. It returns the row key the counts table shows.
func deadLetterTask(t *testing.T, apic *api.Client) string {
	t.Helper()
	const ns = "ns-dlq"
	d := transporttest.NewDestination(t)
	if err := d.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	allow := func(v string) {
		if _, err := apic.ConfigSet(ctx, dynconfig.KeyCallbackAllowedAddresses, api.ConfigWrite{Namespace: ns, Value: json.RawMessage(v)}); err != nil {
			t.Fatalf("allowlist %s: %v", v, err)
		}
	}
	allow(`[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)
	acc, err := apic.SubmitTask(ctx, callbackTo(ns, "wf-dlq", d.CallbackURL()))
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the task's first attempt", func() bool {
		tk, err := apic.Task(ctx, acc.TaskID)
		return err == nil && tk.Attempts >= 1
	})
	allow(`[{"Pattern":"hooks.example.com"}]`)
	testwait.For(t, 45*time.Second, "the task to be dead-lettered", func() bool {
		tk, err := apic.Task(ctx, acc.TaskID)
		return err == nil && tk.Status == state.TaskDLQ
	})
	_, port, _ := net.SplitHostPort(d.Addr())
	return ns + "/http://127.0.0.1:" + port
}

var utcClock = regexp.MustCompile(`^Updated \d\d:\d\d:\d\d UTC$`)

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkLabels(t *testing.T, doc *html.Node, timedKey, goneID string, stay []string) {
	t.Helper()
	body := find(doc, func(n *html.Node) bool { return n.Data == "body" })
	if len(body) != 1 || attr(body[0], "data-loaded") != "true" {
		t.Fatal("the page never finished a refresh (body lacks data-loaded)")
	}
	if s := text(byID(t, doc, "status")); !utcClock.MatchString(s) {
		t.Errorf("status line %q, want \"Updated HH:MM:SS UTC\" and no failed section", s)
	}
	for _, n := range find(doc, hasClass("section-error")) {
		if !hasAttr(n, "hidden") {
			t.Errorf("section error shown: %q", text(n))
		}
	}
	for _, n := range find(doc, func(n *html.Node) bool { return n.Data == "time" }) {
		if !strings.HasSuffix(text(n), "UTC") {
			t.Errorf("time %q does not say UTC", text(n))
		}
	}

	// "reopens in": the time left, not "open for".
	for _, id := range stay {
		cells := find(doc, func(n *html.Node) bool {
			return hasAttr(n, "data-cell") && attr(n, "data-key") == timedKey && attr(n, "data-node") == id
		})
		if len(cells) != 1 {
			t.Fatalf("%d cells of %s on %s", len(cells), timedKey, id)
		}
		re := find(cells[0], hasAttrKey("data-reopens-in"))
		secs, _ := strconv.Atoi(attr(first(re), "data-reopens-in"))
		if len(re) != 1 || secs < 1 || secs > 600 || !strings.Contains(text(cells[0]), "reopens in ") ||
			!strings.Contains(attr(cells[0], "title"), "reopens in ") || strings.Contains(attr(cells[0], "title"), "more") {
			t.Errorf("cell of %s on %s: text %q title %q; want \"reopens in\" with 1..600 s left", timedKey, id, text(cells[0]), attr(cells[0], "title"))
		}
	}

	// The node that left: its own mark in the header and every cell.
	heads := find(doc, func(n *html.Node) bool { return n.Data == "th" && attr(n, "data-node") == goneID })
	if len(heads) != 1 || !strings.Contains(text(heads[0]), "†") || !strings.Contains(attr(heads[0], "class"), "node-gone") {
		t.Errorf("%s's column header: %d, want one marked †", goneID, len(heads))
	}
	gone := find(doc, func(n *html.Node) bool { return hasAttr(n, "data-cell") && attr(n, "data-node") == goneID })
	if len(gone) < 3 {
		t.Errorf("%d cells of %s, want one per breaker key", len(gone), goneID)
	}
	for _, c := range gone {
		if attr(c, "data-state") != "gone" || !strings.Contains(attr(c, "class"), "state-dead") || !regexp.MustCompile(`^† (left|dead)$`).MatchString(text(c)) {
			t.Errorf("%s's cell of %s: state %q class %q text %q; want the gone mark", goneID, attr(c, "data-key"), attr(c, "data-state"), attr(c, "class"), text(c))
		}
	}
	if s := text(byID(t, doc, "breakers-summary")); !strings.Contains(s, "dead or left: "+goneID) {
		t.Errorf("breakers summary %q does not name %s as gone", s, goneID)
	}
	legend := find(doc, hasClass("state-dead"))
	if len(legend) == 0 || !strings.Contains(text(doc), "† gone the node is dead or has left") {
		t.Error("the legend does not explain the gone mark")
	}

	// "guarded" is explained.
	terms := text(byID(t, doc, "breaker-terms"))
	if !strings.Contains(terms, "guarded closed, but admitting only the breaker's MaxRequests probe calls") || !strings.Contains(terms, "reopens in") {
		t.Errorf("terms %q lack the guarded and reopens-in explanations", terms)
	}
}

// checkRetryAfter: the Retry-After deadline (issue 19) stays on the page,
// in UTC.
func checkRetryAfter(t *testing.T, doc *html.Node, key string) {
	t.Helper()
	spans := find(doc, func(n *html.Node) bool { return hasAttr(n, "data-retry-after") })
	held := 0
	for _, sp := range spans {
		if regexp.MustCompile(`^Retry-After until \d\d:\d\d:\d\d UTC$`).MatchString(text(sp)) {
			held++
		} else {
			t.Errorf("Retry-After label %q, want \"Retry-After until HH:MM:SS UTC\"", text(sp))
		}
	}
	if held == 0 {
		t.Errorf("no cell of %s shows its Retry-After deadline", key)
	}
}

func first(ns []*html.Node) *html.Node {
	if len(ns) == 0 {
		return &html.Node{}
	}
	return ns[0]
}

func checkCounts(t *testing.T, doc *html.Node, blockedID, dlqKey string) {
	t.Helper()
	col := func(row *html.Node, c string) int {
		n, _ := strconv.Atoi(text(first(find(row, func(n *html.Node) bool { return attr(n, "data-col") == c }))))
		return n
	}
	row := func(key string) *html.Node {
		rows := find(doc, func(n *html.Node) bool { return attr(n, "data-dest-tasks") == key })
		if len(rows) != 1 {
			t.Errorf("%d rows for %s in the task counts", len(rows), key)
			return &html.Node{}
		}
		return rows[0]
	}
	if r := row("ns-ui/http://127.0.0.1:9"); col(r, "backlog") != 1 || col(r, "blocked") != 1 || col(r, "dlq") != 0 {
		t.Errorf("blocked destination (task %s): backlog %d blocked %d dlq %d, want 1 1 0", blockedID, col(r, "backlog"), col(r, "blocked"), col(r, "dlq"))
	}
	if r := row(dlqKey); col(r, "backlog") != 0 || col(r, "dlq") != 1 {
		t.Errorf("dead-lettering destination: backlog %d dlq %d, want 0 1", col(r, "backlog"), col(r, "dlq"))
	}
	if s := text(byID(t, doc, "dest-tasks-summary")); !strings.Contains(s, "with pending or dead-lettered tasks") {
		t.Errorf("counts summary %q", s)
	}
}

func checkPlots(t *testing.T, doc *html.Node, upKey, downKey, rampKey string, stay []string) {
	t.Helper()
	series := func(root *html.Node, name string) *html.Node {
		return first(find(root, func(n *html.Node) bool { return n.Data == "polyline" && attr(n, "data-series") == name }))
	}
	points := func(n *html.Node) int { v, _ := strconv.Atoi(attr(n, "data-points")); return v }
	maxOf := func(n *html.Node) float64 { v, _ := strconv.ParseFloat(attr(n, "data-max"), 64); return v }
	fig := func(kind, attrKey, v string) *html.Node {
		figs := find(doc, func(n *html.Node) bool { return attr(n, "data-plot") == kind && attr(n, attrKey) == v })
		if len(figs) != 1 {
			t.Errorf("%d %s plots for %s", len(figs), kind, v)
			return &html.Node{}
		}
		return figs[0]
	}
	// Calls per destination: the healthy one called, the failing one failing.
	upFig, downFig := fig("calls", "data-destination", upKey), fig("calls", "data-destination", downKey)
	if c := series(upFig, "calls"); points(c) < 2 || maxOf(c) <= 0 || attr(upFig, "data-calls") == "0" {
		t.Errorf("calls plot of %s: %d points, max %v, %s calls; want its sampled calls", upKey, points(c), maxOf(c), attr(upFig, "data-calls"))
	}
	if f := series(downFig, "failures"); points(f) < 2 || maxOf(f) <= 0 || attr(downFig, "data-failures") == "0" {
		t.Errorf("failures plot of %s: %d points, max %v; want its sampled failures", downKey, points(f), maxOf(f))
	}
	if !strings.Contains(text(downFig), "failures") {
		t.Errorf("calls plot caption %q", text(downFig))
	}
	// Shard ownership over time: a line per owner, from real samples.
	shards := byID(t, doc, "plot-shards")
	lines := find(shards, func(n *html.Node) bool { return n.Data == "polyline" })
	if len(lines) < 2 {
		t.Errorf("%d shard ownership lines, want one per owner", len(lines))
	}
	total := 0.0
	for _, l := range lines {
		if points(l) < 2 {
			t.Errorf("shard line of %s has %d points", attr(l, "data-series"), points(l))
		}
		total = max(total, maxOf(l))
	}
	if total < 1 || total > node.DefaultShards {
		t.Errorf("shard lines peak at %v, want 1..%d", total, node.DefaultShards)
	}
	if s := text(byID(t, doc, "plot-shards")); !strings.Contains(s, "UTC") {
		t.Errorf("shard plot axis %q does not say UTC", s)
	}
	// The recovery ramp over time: each remaining node's line and its rate now.
	rf := fig("ramp", "data-key", rampKey)
	for _, id := range stay {
		if l := series(rf, id); points(l) < 10 || maxOf(l) <= 0 {
			t.Errorf("ramp line of %s: %d points, max %v", id, points(l), maxOf(l))
		}
		if dots := find(rf, func(n *html.Node) bool { return n.Data == "circle" && attr(n, "data-node") == id }); len(dots) != 1 {
			t.Errorf("ramp plot: %d dots for %s's rate now", len(dots), id)
		}
	}
}
