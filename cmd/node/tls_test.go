package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/api"
	"fusebox/internal/tlsutil"
	"fusebox/node"
)

func runCLI(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestTLSToolingAndAdminOverHTTPS creates a CA, a node certificate and a
// client certificate with `fusebox tls`, starts a real node with them and
// drives it with `fusebox admin` over HTTPS, by flags and by environment.
func TestTLSToolingAndAdminOverHTTPS(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	ca := []string{"--ca", p("fusebox-ca.pem"), "--ca-key", p("fusebox-ca-key.pem"), "--out-dir", dir, "--days", "10"}

	if out, err := runCLI(t, ctx, "tls", "ca", "create", "--out-dir", dir, "--days", "30"); err != nil {
		t.Fatalf("tls ca create: %v\n%s", err, out)
	}
	if st, err := os.Stat(p("fusebox-ca-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v, mode %v; want 0600", err, st.Mode())
	}
	if _, err := runCLI(t, ctx, "tls", "ca", "create", "--out-dir", dir); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second ca create over the same files: %v, want a refusal", err)
	}
	if out, err := runCLI(t, ctx, append([]string{"tls", "cert", "create", "--node", "n1", "--ip", "10.1.2.3", "--dns", "n1.example"}, ca...)...); err != nil {
		t.Fatalf("tls cert create --node: %v\n%s", err, out)
	}
	if out, err := runCLI(t, ctx, append([]string{"tls", "cert", "create", "--client", "--name", "alice"}, ca...)...); err != nil {
		t.Fatalf("tls cert create --client: %v\n%s", err, out)
	}
	if _, err := runCLI(t, ctx, append([]string{"tls", "cert", "create", "--ip", "1.2.3.4"}, ca...)...); err == nil || !strings.Contains(err.Error(), "--node ID, or --client --name NAME") {
		t.Fatalf("cert create without --node/--client: %v", err)
	}
	m, err := tlsutil.Load(tlsutil.Files{CertFile: p("fusebox-node-n1.pem"), KeyFile: p("fusebox-node-n1-key.pem"), CAFile: p("fusebox-ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"127.0.0.1", "localhost", "10.1.2.3", "n1.example", "server.fusebox"} {
		if err := m.Cert.Leaf.VerifyHostname(h); err != nil {
			t.Errorf("node certificate: %v", err)
		}
	}

	n, err := node.New(node.Config{NodeID: "n1", DataDir: p("data"), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Shards: 4, Timing: "fast", Version: "test", AdminToken: "tok-123", GossipKeys: [][]byte{bytes.Repeat([]byte{7}, 32)},
		TLSCertFile: p("fusebox-node-n1.pem"), TLSKeyFile: p("fusebox-node-n1-key.pem"), TLSCAFile: p("fusebox-ca.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := n.HTTPAddr()
	cc, err := tlsutil.ClientConfig(tlsutil.ClientFiles{CAFile: p("fusebox-ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	apic := api.NewTLSClient(addr, "", newHTTPSClient(cc))
	for apic.Do(ctx, "GET", "/readyz", nil, nil, nil) != nil {
		if ctx.Err() != nil {
			t.Fatal("node not ready over HTTPS")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Reads need a token too (the read role) once the node has tokens.
	t.Setenv("FUSEBOX_TOKEN", "tok-123")
	if out, err := runCLI(t, ctx, "admin", "members", "--addr", "https://"+addr, "--ca-file", p("fusebox-ca.pem")); err != nil || !strings.Contains(out, "n1") {
		t.Fatalf("admin over https with --ca-file: %v\n%s", err, out)
	}
	// The environment, Consul style; no scheme + a CA file means https.
	t.Setenv("FUSEBOX_ADDR", addr)
	t.Setenv("FUSEBOX_CACERT", p("fusebox-ca.pem"))
	t.Setenv("FUSEBOX_CLIENT_CERT", p("fusebox-client-alice.pem"))
	t.Setenv("FUSEBOX_CLIENT_KEY", p("fusebox-client-alice-key.pem"))
	if out, err := runCLI(t, ctx, "admin", "raft", "--json"); err != nil || !strings.Contains(out, `"leader": "n1"`) {
		t.Fatalf("admin from the environment with a client certificate: %v\n%s", err, out)
	}
	t.Setenv("FUSEBOX_CLIENT_KEY", "")
	if _, err := runCLI(t, ctx, "admin", "raft"); err == nil || !strings.Contains(err.Error(), "--client-cert is set but --client-key is not") {
		t.Fatalf("client cert without key: %v", err)
	}
	os.Unsetenv("FUSEBOX_CLIENT_CERT")
	os.Unsetenv("FUSEBOX_CLIENT_KEY")

	wantExit := func(code int, want string, args ...string) {
		t.Helper()
		out, err := runCLI(t, ctx, args...)
		ee, ok := err.(*exitError)
		if !ok || ee.code != code || !strings.Contains(ee.msg, want) {
			t.Fatalf("%v: %v (%s); want exit %d mentioning %q", args, err, out, code, want)
		}
	}
	// Tokens: none → refused; FUSEBOX_TOKEN (the value); the deprecated
	// FUSEBOX_ADMIN_TOKEN_FILE still works, with a warning.
	put := []string{"admin", "endpoints", "put", "ep1", "http://127.0.0.1:9/nexus"}
	os.Unsetenv("FUSEBOX_TOKEN")
	wantExit(3, "Bearer", put...)
	t.Setenv("FUSEBOX_TOKEN", "tok-123")
	if out, err := runCLI(t, ctx, put...); err != nil {
		t.Fatalf("write with FUSEBOX_TOKEN: %v\n%s", err, out)
	}
	os.Unsetenv("FUSEBOX_TOKEN")
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FUSEBOX_ADMIN_TOKEN_FILE", tokFile)
	if out, err := runCLI(t, ctx, put...); err != nil || !strings.Contains(out, "FUSEBOX_ADMIN_TOKEN_FILE is deprecated") {
		t.Fatalf("write with FUSEBOX_ADMIN_TOKEN_FILE: %v\n%s", err, out)
	}
	os.Unsetenv("FUSEBOX_ADMIN_TOKEN_FILE")
	wantExit(4, "serves HTTPS: use --addr https://"+addr, "admin", "members", "--addr", "http://"+addr)
	os.Unsetenv("FUSEBOX_CACERT")
	wantExit(4, "not signed by a CA in --ca-file", "admin", "members", "--addr", "https://"+addr)
}
