package main

import (
	"net/http"
	"net/http/httptest"
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

// Write commands print no URL secret: endpoints put shows the URL redacted
// (as every read does), and breakers force, given a full callback URL,
// compares the normalised key (scheme://host:port) from the answer with
// the nodes' breakers: it warns about that key without the query, and not
// at all once a node has the host's breaker.
func TestWriteCommandsRedactURLSecrets(t *testing.T) {
	h := newAdminNode(t, 4)
	const secret = "SECRET-q7x2"
	out := h.mustRun("endpoint ep →", "endpoints", "put", "ep", "http://127.0.0.1:9/x?key="+secret)
	if strings.Contains(out, secret) || !strings.Contains(out, "http://127.0.0.1:9/x?") {
		t.Fatalf("endpoints put printed the URL's query or no URL:\n%s", out)
	}

	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(dest.Close)
	key := "http://" + dest.Listener.Addr().String()
	force := func(mode, destination string) string {
		return h.mustRun("forced "+mode, "breakers", "force", mode, "--task-group", "callbacks.Invocation", "--namespace", "ns-1",
			"--destination", destination)
	}
	out = force("open", key+"/cb?x="+secret)
	if strings.Contains(out, secret) {
		t.Fatalf("breakers force printed the URL's query:\n%s", out)
	}
	if !strings.Contains(out, "warning: no node has a breaker for callbacks.Invocation/ns-1/"+key+" (") {
		t.Fatalf("first force of a key no node has: want a warning naming the normalised key\n%s", out)
	}
	h.eventually(key, "breakers", "list") // the node now holds the forced key
	out = force("auto", key+"/other?y="+secret)
	if strings.Contains(out, "warning") || strings.Contains(out, secret) {
		t.Fatalf("force of another URL of a host the node has a breaker for: warned, or printed the query:\n%s", out)
	}
}
