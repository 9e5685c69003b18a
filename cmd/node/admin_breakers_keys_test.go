package main

import (
	"strings"
	"testing"
)

// breakers force warns when no node has the key, naming close matches,
// and stays quiet for a key a node has.
func TestBreakersForceWarnsUnseenKey(t *testing.T) {
	h := newAdminNode(t, 4)
	key := []string{"--task-group", "nexusoperations.Invocation", "--namespace", "ns-1", "--destination", "payments-endpoint"}
	out := h.mustRun("forced open", append([]string{"breakers", "force", "open"}, key...)...)
	if !strings.Contains(out, "warning: no node has a breaker") {
		t.Fatalf("first force of a key no node has: no warning\n%s", out)
	}
	h.eventually("payments-endpoint", "breakers", "list") // the node now holds the forced key
	out = h.mustRun("forced closed", append([]string{"breakers", "force", "closed"}, key...)...)
	if strings.Contains(out, "warning") {
		t.Fatalf("force of a key the node has warned:\n%s", out)
	}
	typo := []string{"--task-group", "nexusoperations.Invocation", "--namespace", "ns-1", "--destination", "payment-endpont"}
	out = h.mustRun("forced auto", append([]string{"breakers", "force", "auto"}, typo...)...)
	if !strings.Contains(out, "warning: no node has a breaker for nexusoperations.Invocation/ns-1/payment-endpont") ||
		!strings.Contains(out, "close matches: nexusoperations.Invocation/ns-1/payments-endpoint") {
		t.Fatalf("typo: want a warning naming the close match\n%s", out)
	}
	if d := editDistance("payments-endpoint", "payment-endpont"); d != 2 {
		t.Errorf("editDistance = %d, want 2", d)
	}
}
