package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/api"
	"fusebox/internal/testwait"
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
	return newAdminNodeWith(t, func(c *node.Config) { c.Shards = shards })
}

// newAdminNodeWith is newAdminNode with its config changed by mutate
// (tokens, pprof, shards); it returns once the node is ready.
func newAdminNodeWith(t *testing.T, mutate func(*node.Config)) *adminNode {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) }) // runs last: after Close
	cfg := node.Config{NodeID: "n1", DataDir: filepath.Join(t.TempDir(), "n1"), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Shards: 4, Timing: "fast", Version: "test"}
	mutate(&cfg)
	n, err := node.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Ready first: a node without a shard map yet answers some reads 503.
	testwait.ForErr(t, 30*time.Second, "the node ready", func() error {
		return api.NewClient(n.HTTPAddr(), "", nil).Do(ctx, "GET", "/readyz", nil, nil, nil)
	})
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

// newAdminCluster starts n real in-process nodes on loopback that form one
// cluster, waits until every one is ready and the first sees all of them
// alive, and returns a way to run the admin commands against each. At the
// end of the test they are closed and no goroutine may be left behind.
func newAdminCluster(t *testing.T, n int, mutate func(*node.Config)) []*adminNode {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) }) // runs last: after every Close
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	var (
		out  []*adminNode
		join []string
		tok  string // the nodes' admin token, if any
	)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		cfg := node.Config{NodeID: id, DataDir: filepath.Join(t.TempDir(), id), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
			RaftAddr: "127.0.0.1:0", Join: join, BootstrapExpect: n, Shards: 4, Timing: "fast", Version: "test"}
		if mutate != nil {
			mutate(&cfg)
		}
		tok = cfg.AdminToken
		nd, err := node.New(cfg, nil)
		if err != nil {
			t.Fatalf("node %s: %v", id, err)
		}
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer ccancel()
			_ = nd.Close(cctx)
		})
		if err := nd.Start(ctx); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		if i == 1 {
			join = []string{nd.GossipAddr()}
		}
		out = append(out, &adminNode{t: t, ctx: ctx, n: nd})
	}
	testwait.ForErr(t, 60*time.Second, "every node ready, and all alive as the first sees them", func() error {
		for _, h := range out {
			if err := api.NewClient(h.n.HTTPAddr(), "", nil).Do(ctx, "GET", "/readyz", nil, nil, nil); err != nil {
				return fmt.Errorf("%s: %w", h.n.HTTPAddr(), err)
			}
		}
		ms, err := api.NewClient(out[0].n.HTTPAddr(), tok, nil).Members(ctx)
		if err != nil {
			return err
		}
		alive := 0
		for _, m := range ms {
			if m.State == "alive" {
				alive++
			}
		}
		if alive != n {
			return fmt.Errorf("%d of %d members alive", alive, n)
		}
		return nil
	})
	return out
}
