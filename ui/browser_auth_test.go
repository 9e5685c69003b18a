package ui_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"fusebox/node"
)

// TestStatusPageWithTokens drives the page against a two-node cluster that
// has API tokens: without a token the page asks for one; with a read token
// handed over in the fragment (/ui/#token=…, kept in sessionStorage and
// sent as a bearer header) every section loads, the cluster-wide breaker
// grid and timeline included (nodes fetch each other's with their node
// token); a token of the submit role is refused with the prompt shown.
func TestStatusPageWithTokens(t *testing.T) {
	bin := chromium(t)
	const (
		readTok   = "read-0123456789abcdef0123456789abcdef00"
		submitTok = "submit-0123456789abcdef0123456789abcdef"
	)
	file := filepath.Join(t.TempDir(), "tokens")
	body := "viewer read " + readTok + "\nproducer submit " + submitTok + "\n" +
		"nodes node node-0123456789abcdef0123456789abcdef00\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := startClusterWith(t, 2, func(c *node.Config) { c.AdminTokenFile = file })
	page := "http://" + nodes[0].HTTPAddr() + "/ui/"

	load := func(url string) *html.Node {
		t.Helper()
		dom := runChromium(t, bin, "--virtual-time-budget=6000", "--dump-dom", url)
		doc, err := html.Parse(bytes.NewReader(dom))
		if err != nil {
			t.Fatalf("parse the dumped DOM: %v", err)
		}
		if b := find(doc, func(n *html.Node) bool { return n.Data == "body" }); len(b) != 1 || attr(b[0], "data-loaded") != "true" {
			t.Fatalf("%s: the page never finished a refresh:\n%s", url, tail(string(dom)))
		}
		return doc
	}

	doc := load(page)
	if hasAttr(byID(t, doc, "auth"), "hidden") || !strings.Contains(text(byID(t, doc, "status")), "needs an API token") {
		t.Errorf("no token: prompt hidden=%v, status %q; want the token prompt", hasAttr(byID(t, doc, "auth"), "hidden"), text(byID(t, doc, "status")))
	}

	doc = load(page + "#token=" + readTok)
	if s := text(byID(t, doc, "status")); !strings.HasPrefix(s, "Updated") || strings.Contains(s, "could not load") {
		t.Errorf("read token: status %q, want a clean update", s)
	}
	if !hasAttr(byID(t, doc, "auth"), "hidden") {
		t.Error("read token: the prompt is still shown")
	}
	for _, n := range find(doc, hasClass("section-error")) {
		if !hasAttr(n, "hidden") {
			t.Errorf("read token: section error shown: %q", text(n))
		}
	}
	if m := find(doc, hasAttrKey("data-member")); len(m) != 2 {
		t.Errorf("read token: %d member rows, want 2", len(m))
	}
	if s := text(byID(t, doc, "breakers-summary")) + text(byID(t, doc, "timeline-summary")); strings.Contains(s, "no timeline from") || strings.Contains(s, "did not answer") {
		t.Errorf("read token: a peer did not answer the merge: %q", s)
	}

	doc = load(page + "#token=" + submitTok)
	if hasAttr(byID(t, doc, "auth"), "hidden") || !strings.Contains(text(byID(t, doc, "status")), "may not read") {
		t.Errorf("submit token: prompt hidden=%v, status %q; want the prompt and a refusal", hasAttr(byID(t, doc, "auth"), "hidden"), text(byID(t, doc, "status")))
	}
}
