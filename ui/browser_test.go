package ui_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/node"
	"fusebox/ui"
)

// hostileReason is an operator's reason that is also markup.
const hostileReason = `<img id="pwned-reason" src="x"> &amp; reason`

// TestStatusPageInBrowser drives the page in headless Chromium against a
// real three-node cluster with one breaker forced open and one forced
// closed, and checks what the page shows.
//
// Each node serves the page and its own transitions timeline at /ui/; the
// forced open reaches every node's pool through Raft, and so every node's
// timeline.
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t)
	nodes := startCluster(t, 3)
	hc := testHTTPClient(t)

	open := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns-ui", Destination: "payments-api"}
	// The forced-closed key and its reason carry markup: the page must show
	// it as text, never build elements from it.
	closed := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns-ui", Destination: `<i id="pwned-dest">orders</i>`}
	apic := api.NewClient(nodes[1].HTTPAddr(), "", hc)
	for _, f := range []api.BreakerForce{
		{TaskGroup: open.TaskGroup, Namespace: open.NamespaceID, Destination: open.Destination, Mode: "open", Reason: "ui test: payments down"},
		{TaskGroup: closed.TaskGroup, Namespace: closed.NamespaceID, Destination: closed.Destination, Mode: "closed", Reason: hostileReason},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := apic.Do(ctx, http.MethodPost, "/v1/breakers/force", nil, f, nil)
		cancel()
		if err != nil {
			t.Fatalf("force %s/%s: %v", f.Destination, f.Mode, err)
		}
	}
	// An operator pins shard 0 to n2: the map marks it.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := apic.Do(ctx, http.MethodPost, "/v1/shards/0/move", nil, api.ShardMove{Node: "n2"}, nil)
	cancel()
	if err != nil {
		t.Fatalf("move shard 0 to n2: %v", err)
	}
	testwait.For(t, 20*time.Second, "n1 to see shard 0 pinned to n2", func() bool {
		var list api.ShardList
		err := api.NewClient(nodes[0].HTTPAddr(), "", hc).Do(context.Background(), http.MethodGet, "/v1/shards", nil, nil, &list)
		return err == nil && len(list.Shards) > 0 && list.Shards[0].Pinned == "n2" && list.Shards[0].Owner == "n2"
	})
	for _, nd := range nodes {
		c := api.NewClient(nd.HTTPAddr(), "", hc)
		testwait.For(t, 20*time.Second, nd.HTTPAddr()+" applying both forces", func() bool {
			var list api.BreakerList
			if err := c.Do(context.Background(), http.MethodGet, "/v1/breakers", nil, nil, &list); err != nil {
				return false
			}
			ok := 0
			for _, b := range list.Breakers {
				if b.Destination == open.Destination && b.State == "open" || b.Destination == closed.Destination && b.Mode == "forced-closed" {
					ok++
				}
			}
			return ok == 2
		})
	}

	blockedID := submitBlockedTask(t, apic, nodes)
	ramping := rampKey(t, apic, nodes)

	// Every node serves the page itself; start at n1's.
	front := "http://" + nodes[0].HTTPAddr() + "/ui/"
	for _, nd := range nodes {
		c := api.NewClient(nd.HTTPAddr(), "", hc)
		testwait.For(t, 10*time.Second, nd.HTTPAddr()+" recording the forced open", func() bool {
			var l ui.TransitionList
			return c.Do(context.Background(), http.MethodGet, "/ui/api/transitions", nil, nil, &l) == nil && len(l.Transitions) >= 1
		})
	}

	dom := runChromium(t, bin, "--virtual-time-budget=8000", "--dump-dom", front)
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatalf("parse the dumped DOM: %v", err)
	}
	checkPage(t, doc, open.String(), closed.String())
	checkRamp(t, doc, ramping.String())
	if rows := find(doc, hasAttrKey("data-task")); len(rows) != 1 || attr(rows[0], "data-task") != blockedID ||
		!strings.Contains(text(rows[0]), "circuit breaker open") {
		t.Errorf("blocked tasks table: %d rows, want task %s blocked by its open breaker", len(rows), blockedID)
	}
	if t.Failed() {
		t.Logf("dumped DOM:\n%s", tail(string(dom)))
	}

	dir := os.Getenv("FUSEBOX_UI_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.ArtifactDir() // kept with go test -artifacts -outputdir=DIR
	}
	shot, err := filepath.Abs(filepath.Join(dir, "status-page.png"))
	if err != nil {
		t.Fatal(err)
	}
	runChromium(t, bin, "--virtual-time-budget=8000", "--window-size=1400,1000", "--screenshot="+shot, front)
	st, err := os.Stat(shot)
	if err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (size %v); want a PNG of the page", shot, err, st)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, st.Size())
}

// checkPage asserts what the rendered page shows.
func checkPage(t *testing.T, doc *html.Node, openKey, closedKey string) {
	t.Helper()
	body := find(doc, func(n *html.Node) bool { return n.Data == "body" })
	if len(body) != 1 || attr(body[0], "data-loaded") != "true" {
		t.Fatal("the page never finished a refresh (body lacks data-loaded)")
	}
	status := byID(t, doc, "status")
	if s := text(status); !strings.HasPrefix(s, "Updated") || strings.Contains(s, "could not load") {
		t.Errorf("status line %q, want a clean update", s)
	}
	for _, n := range find(doc, hasClass("section-error")) {
		if !hasAttr(n, "hidden") {
			t.Errorf("section error shown: %q", text(n))
		}
	}

	// Members: three alive voters, one leader.
	members := find(doc, hasAttrKey("data-member"))
	leaders := 0
	var ids []string
	for _, m := range members {
		ids = append(ids, attr(m, "data-member"))
		s := text(m)
		if !strings.Contains(s, "alive") || !strings.Contains(s, "voter") {
			t.Errorf("member row %q, want alive and voter", s)
		}
		if strings.Contains(s, "★ leader") {
			leaders++
		}
	}
	if strings.Join(ids, ",") != "n1,n2,n3" || leaders != 1 {
		t.Errorf("members %v with %d leaders, want n1,n2,n3 and exactly one leader", ids, leaders)
	}

	// Shard map: every shard drawn with its owner as text.
	shards := find(doc, hasAttrKey("data-shard"))
	if len(shards) != node.DefaultShards {
		t.Errorf("%d shard cells, want %d", len(shards), node.DefaultShards)
	}
	owners := map[string]bool{}
	for _, s := range shards {
		o := attr(s, "data-owner")
		if o != "n1" && o != "n2" && o != "n3" || !strings.Contains(text(s), o) || !strings.Contains(attr(s, "class"), "owner-") {
			t.Errorf("shard %s: owner %q text %q class %q", attr(s, "data-shard"), o, text(s), attr(s, "class"))
		}
		owners[o] = true
		pinned := strings.Contains(" "+attr(s, "class")+" ", " pinned ")
		if attr(s, "data-shard") == "0" {
			if !pinned || o != "n2" || !strings.Contains(text(s), "P") || !strings.Contains(attr(s, "title"), "pinned to n2") {
				t.Errorf("shard 0: class %q text %q title %q, want it marked pinned to n2", attr(s, "class"), text(s), attr(s, "title"))
			}
		} else if pinned {
			t.Errorf("shard %s marked pinned", attr(s, "data-shard"))
		}
	}
	legend := find(byID(t, doc, "shard-legend"), hasAttrKey("data-owner"))
	if len(legend) != len(owners) {
		t.Errorf("legend has %d owners, the map %d", len(legend), len(owners))
	}

	// Breaker grid: the forced-open key open on every node, the forced-closed
	// key closed on every node, each with its state as text.
	for _, c := range []struct{ key, state, label, mode string }{
		{openKey, "open", "✕ OPEN", "forced-open"},
		{closedKey, "closed", "✓ closed", "forced-closed"},
	} {
		cells := find(doc, func(n *html.Node) bool { return hasAttr(n, "data-cell") && attr(n, "data-key") == c.key })
		seen := map[string]bool{}
		for _, cell := range cells {
			seen[attr(cell, "data-node")] = true
			if attr(cell, "data-state") != c.state || attr(cell, "data-source") != "operator" || attr(cell, "data-mode") != c.mode ||
				!strings.Contains(text(cell), c.label) || !strings.Contains(text(cell), "operator · "+c.mode) ||
				!strings.Contains(attr(cell, "title"), "mode "+c.mode) {
				t.Errorf("cell %s on %s: state %q text %q title %q", c.key, attr(cell, "data-node"), attr(cell, "data-state"), text(cell), attr(cell, "title"))
			}
		}
		if len(cells) != 3 || !seen["n1"] || !seen["n2"] || !seen["n3"] {
			t.Errorf("%s: cells on %v, want n1, n2 and n3", c.key, seen)
		}
	}
	if s := text(byID(t, doc, "forced")); !strings.Contains(s, openKey) || !strings.Contains(s, "ui test: payments down") || !strings.Contains(s, closedKey) {
		t.Errorf("forced table %q lacks the forced keys", s)
	}

	// Escaping: markup from the API is text.
	if n := find(doc, func(n *html.Node) bool { return strings.HasPrefix(attr(n, "id"), "pwned") }); len(n) != 0 {
		t.Errorf("API strings were rendered as markup: %d injected elements", len(n))
	}
	if s := text(byID(t, doc, "forced")); !strings.Contains(s, hostileReason) || !strings.Contains(s, `<i id="pwned-dest">orders</i>`) {
		t.Errorf("forced table %q does not show the markup as text", s)
	}

	// Timeline: every node's transition, merged (the blocked task's forced
	// breaker has its own three).
	events := find(doc, func(n *html.Node) bool { return hasAttrKey("data-event")(n) && attr(n, "data-key") == openKey })
	seen := map[string]bool{}
	for _, e := range events {
		if attr(e, "data-key") == openKey && attr(e, "data-to") == "open" && strings.Contains(text(e), "closed → ✕ OPEN") &&
			strings.Contains(text(e), "source operator") {
			seen[attr(e, "data-node")] = true
		}
	}
	if len(events) != 3 || !seen["n1"] || !seen["n2"] || !seen["n3"] {
		t.Errorf("timeline: %d events, open transitions from %v; want one from each of n1, n2, n3", len(events), seen)
	}
}

// submitBlockedTask forces a callback destination's breaker open, submits a
// task to it and waits until the API lists the task as blocked (its owner's
// breaker refused it). It returns the task id.
func submitBlockedTask(t *testing.T, apic *api.Client, nodes []*node.Node) string {
	t.Helper()
	const url = "http://127.0.0.1:9/cb"
	f := api.BreakerForce{TaskGroup: breakerpool.TaskGroupCallback, Namespace: "ns-ui", Destination: "http://127.0.0.1:9",
		Mode: "open", Reason: "ui test: blocked task"}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := apic.Do(ctx, http.MethodPost, "/v1/breakers/force", nil, f, nil); err != nil {
		t.Fatalf("force %s open: %v", f.Destination, err)
	}
	for _, nd := range nodes { // every possible owner refuses it
		c := api.NewClient(nd.HTTPAddr(), "", testHTTPClient(t))
		testwait.For(t, 20*time.Second, nd.HTTPAddr()+" applying the force", func() bool {
			var list api.BreakerList
			if err := c.Do(context.Background(), http.MethodGet, "/v1/breakers", nil, nil, &list); err != nil {
				return false
			}
			for _, b := range list.Breakers {
				if b.Destination == f.Destination && b.State == "open" {
					return true
				}
			}
			return false
		})
	}
	acc, err := apic.SubmitTask(ctx, api.TaskSubmit{NamespaceID: "ns-ui", WorkflowID: "wf-blocked", TaskGroup: breakerpool.TaskGroupCallback,
		Destination: url, Request: api.TaskRequest{Body: []byte("done"), ContentType: "text/plain"}})
	if err != nil {
		t.Fatalf("submit a task to the open destination: %v", err)
	}
	testwait.For(t, 20*time.Second, "the task to be blocked", func() bool {
		tk, err := apic.Task(context.Background(), acc.TaskID)
		return err == nil && tk.Blocked != nil
	})
	return acc.TaskID
}
