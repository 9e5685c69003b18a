package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/api"
	"fusebox/internal/testwait"
	"fusebox/node"
)

// On a node with tokens, reads need one too: a command without a token,
// or with one of too small a role, exits 3 and says how to give one
// (--token-file, FUSEBOX_TOKEN); the help says reads need a token and that
// exit 3 covers these refusals.
func TestAdminAuthFailuresNameTheTokenFlags(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	t.Setenv("FUSEBOX_TOKEN", "")
	t.Setenv("FUSEBOX_TOKEN_FILE", "")
	os.Unsetenv("FUSEBOX_ADMIN_TOKEN_FILE")
	dir := t.TempDir()
	const adminTok, readTok = "admin-token-0123456789abcdef0123456789", "read-token-0123456789abcdef01234567890"
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("ops admin "+adminTok+"\ngrafana read "+readTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readFile := filepath.Join(dir, "read.token")
	if err := os.WriteFile(readFile, []byte(readTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{NodeID: "n1", DataDir: filepath.Join(dir, "n1"), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Shards: 4, Timing: "fast", Version: "test", AdminTokenFile: tokens}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, 30*time.Second, "the node ready", func() error {
		return api.NewClient(n.HTTPAddr(), "", nil).Do(ctx, "GET", "/readyz", nil, nil, nil)
	})
	h := &adminNode{t: t, ctx: ctx, n: n}

	for _, want := range []string{"--token-file", "FUSEBOX_TOKEN"} {
		h.wantExit(3, want, "members") // a read without a token
		h.wantExit(3, want, "--token-file", readFile, "endpoints", "put", "ep", "http://127.0.0.1:9/x")
	}
	h.mustRun("n1", "--token-file", readFile, "members")

	help := h.mustRun("--token-file", "--help")
	if strings.Contains(help, "needed for changes") || !strings.Contains(help, "reads too") {
		t.Errorf("--token-file help does not say reads need a token:\n%s", help)
	}
	if !strings.Contains(strings.Join(strings.Fields(help), " "), "3 the cluster refused (invalid input, not found, conflict, no token or one without the role)") {
		t.Errorf("exit 3 is not documented for refused tokens:\n%s", help)
	}
}
