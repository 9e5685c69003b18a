package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// TestFleetShareInBrowser (issue 19 §3): a destination with a fleet rate
// budget so small that its tasks stay queued; the status page shows, in the
// cell of every node holding some, that node's share of the budget.
func TestFleetShareInBrowser(t *testing.T) {
	bin := chromium(t)
	nodes := startCluster(t, 3)
	hc := testHTTPClient(t)
	apic := api.NewClient(nodes[0].HTTPAddr(), "", hc)
	dest := transporttest.NewDestination(t)
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := apic.ConfigSet(ctx, dynconfig.KeyFleetRPS, api.ConfigWrite{Destination: host, Value: json.RawMessage(`0.5`)}); err != nil {
		t.Fatalf("set %s: %v", dynconfig.KeyFleetRPS, err)
	}
	var tasks []api.TaskSubmit
	for i := range 30 {
		tasks = append(tasks, api.TaskSubmit{NamespaceID: "ns-ui", WorkflowID: fmt.Sprintf("wf-fleet-%d", i), TaskGroup: breakerpool.TaskGroupCallback,
			Destination: dest.CallbackURL(), Request: api.TaskRequest{Body: []byte("done"), ContentType: "text/plain"}})
	}
	if _, err := apic.SubmitTasks(ctx, tasks); err != nil {
		t.Fatalf("submit: %v", err)
	}
	holders := 0
	testwait.For(t, 20*time.Second, "a share of the budget in GET /v1/breakers on the nodes holding tasks", func() bool {
		holders = 0
		for _, nd := range nodes {
			var list api.BreakerList
			if err := api.NewClient(nd.HTTPAddr(), "", hc).Do(context.Background(), http.MethodGet, "/v1/breakers", nil, nil, &list); err != nil {
				return false
			}
			for _, b := range list.Breakers {
				if b.Destination == host && b.Fleet != nil && b.Fleet.Share > 0 {
					holders++
				}
			}
		}
		return holders >= 2
	})

	dom := runChromium(t, bin, "--virtual-time-budget=8000", "--dump-dom", "http://"+nodes[0].HTTPAddr()+"/ui/")
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatalf("parse the dumped DOM: %v", err)
	}
	shown := 0
	for _, c := range find(doc, hasClass("cell-fleet")) {
		s, err := strconv.ParseFloat(attr(c, "data-fleet-share"), 64)
		if err != nil || s <= 0 || s > 1 || !strings.Contains(text(c), "fleet ") || !strings.Contains(attr(c, "title"), "fleet budget 0.5 calls/s") {
			t.Errorf("fleet share %q (%v), text %q, title %q", attr(c, "data-fleet-share"), err, text(c), attr(c, "title"))
			continue
		}
		shown++
	}
	t.Logf("%d cells show a share of the budget", shown)
	if shown < 2 {
		t.Errorf("%d cells show a share of the budget, want one per node holding tasks (%d at the last look)", shown, holders)
	}
	if t.Failed() {
		t.Logf("dumped DOM:\n%s", tail(string(dom)))
	}
}
