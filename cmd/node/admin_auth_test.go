package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fusebox/node"
)

// On a node with tokens, reads need one too: a command without a token,
// or with one of too small a role, exits 3 and says how to give one
// (--token-file, FUSEBOX_TOKEN); the help says reads need a token and that
// exit 3 covers these refusals.
func TestAdminAuthFailuresNameTheTokenFlags(t *testing.T) {
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
	h := newAdminNodeWith(t, func(c *node.Config) { c.AdminTokenFile = tokens })

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
