package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/node"
)

// rampKey gives a Nexus key an hour-long recovery ramp (issue 19 §2) and
// starts it on every node: an operator forces the key open, then closed,
// and each node's close starts the ramp. It returns the key once every
// node's GET /v1/breakers shows the ramp.
func rampKey(t *testing.T, apic *api.Client, nodes []*node.Node) breakerpool.Key {
	t.Helper()
	k := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns-ui", Destination: "ramping-api"}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := apic.ConfigSet(ctx, dynconfig.KeyRampDuration, api.ConfigWrite{Destination: k.Destination, Value: json.RawMessage(`"1h"`)}); err != nil {
		t.Fatalf("set %s: %v", dynconfig.KeyRampDuration, err)
	}
	hc := testHTTPClient(t)
	for _, mode := range []string{"open", "closed"} {
		f := api.BreakerForce{TaskGroup: k.TaskGroup, Namespace: k.NamespaceID, Destination: k.Destination, Mode: mode, Reason: "ui test: ramp"}
		if err := apic.Do(ctx, http.MethodPost, "/v1/breakers/force", nil, f, nil); err != nil {
			t.Fatalf("force %s %s: %v", k.Destination, mode, err)
		}
		want := map[string]string{"open": "open", "closed": "closed"}[mode]
		for _, nd := range nodes {
			c := api.NewClient(nd.HTTPAddr(), "", hc)
			var last string // what the node showed last, for the failure message
			deadline := time.Now().Add(30 * time.Second)
			for done := false; !done; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s did not apply %s and its ramp within 30s; it shows %s", nd.HTTPAddr(), mode, last)
				}
				var list api.BreakerList
				if err := c.Do(context.Background(), http.MethodGet, "/v1/breakers", nil, nil, &list); err != nil {
					last = err.Error()
					continue
				}
				last = "no breaker for the key"
				for _, b := range list.Breakers {
					if b.Destination != k.Destination {
						continue
					}
					last = fmt.Sprintf("state %s source %s mode %s generation %d ramp %+v", b.State, b.Source, b.Mode, b.Generation, b.Ramp)
					if b.State == want && (mode == "open" || b.Ramp != nil) {
						done = true
					}
				}
			}
		}
	}
	return k
}

// checkRamp asserts that every node's cell of key plots its ramp.
func checkRamp(t *testing.T, doc *html.Node, key string) {
	t.Helper()
	cells := find(doc, func(n *html.Node) bool { return hasAttr(n, "data-cell") && attr(n, "data-key") == key })
	if len(cells) != 3 {
		t.Fatalf("%d cells for the ramping key %s, want 3", len(cells), key)
	}
	for _, cell := range cells {
		plots := find(cell, hasAttrKey("data-ramp"))
		bars := find(cell, hasClass("ramp-bar"))
		if len(plots) != 1 || len(bars) < 10 || !strings.Contains(text(cell), "ramp ") || !strings.Contains(attr(plots[0], "title"), "calls/s") {
			t.Errorf("cell of %s on %s: %d ramp plots with %d bars, text %q; want one plot of its stages", key, attr(cell, "data-node"), len(plots), len(bars), text(cell))
		}
	}
}
