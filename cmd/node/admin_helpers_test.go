package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/api"
	"fusebox/node"
)

// adminNode is a real in-process single node and a way to run the admin
// commands against it, as a person would from a shell.
type adminNode struct {
	t   *testing.T
	ctx context.Context
	n   *node.Node
}

// newAdminNode starts the node; at the end of the test it is closed and no
// goroutine may be left behind.
func newAdminNode(t *testing.T, shards int) *adminNode {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) }) // runs last: after Close
	dir := t.TempDir()
	n, err := node.New(node.Config{NodeID: "n1", DataDir: filepath.Join(dir, "n1"), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Shards: shards, Timing: "fast", Version: "test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	apic := api.NewClient(n.HTTPAddr(), "", nil)
	for apic.Do(ctx, "GET", "/readyz", nil, nil, nil) != nil {
		if ctx.Err() != nil {
			t.Fatal("node not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &adminNode{t: t, ctx: ctx, n: n}
}

func (h *adminNode) run(args ...string) (string, error) {
	h.t.Helper()
	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"admin", "--addr", h.n.HTTPAddr()}, args...))
	err := root.ExecuteContext(h.ctx)
	return out.String(), err
}

func (h *adminNode) mustRun(want string, args ...string) string {
	h.t.Helper()
	out, err := h.run(args...)
	if err != nil || !strings.Contains(out, want) {
		h.t.Fatalf("%v: %v\n%s\nwant %q in the output", args, err, out, want)
	}
	return out
}

// eventually runs the command until its output contains want (the node
// applies some writes asynchronously, e.g. forced breakers to its pool).
func (h *adminNode) eventually(want string, args ...string) string {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := h.run(args...)
		if err == nil && strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%v: %v\n%s\nwant %q in the output within 10s", args, err, out, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *adminNode) wantExit(code int, want string, args ...string) {
	h.t.Helper()
	out, err := h.run(args...)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != code || !strings.Contains(ee.msg+out, want) {
		h.t.Fatalf("%v: err %v (%s); want exit %d mentioning %q", args, err, out, code, want)
	}
}
