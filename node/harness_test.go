package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
)

// testNode is one in-process node of a test cluster.
type testNode struct {
	t   *testing.T
	cfg Config
	*Node
}

// testCluster starts n real nodes on loopback with fast timings: memberlist
// and Raft over real sockets, free ports, temp data dirs. Nodes are closed
// in t.Cleanup.
type testCluster struct {
	t     *testing.T
	nodes []*testNode
}

func testLogger(t *testing.T) *slog.Logger {
	if v := os.Getenv("FUSEBOX_TEST_LOG"); v != "" {
		// FUSEBOX_TEST_LOG=1 logs everything; a level name (info, warn)
		// logs from it up, for runs that debug logging slows too much.
		level := slog.LevelDebug
		_ = level.UnmarshalText([]byte(v))
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.DiscardHandler)
}

func testConfig(t *testing.T, id string, bootstrapExpect int, join []string) Config {
	return Config{
		NodeID: id, DataDir: filepath.Join(t.TempDir(), id),
		HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Join: join, BootstrapExpect: bootstrapExpect, Shards: DefaultShards, Timing: "fast", Version: "test",
	}
}

func startNode(t *testing.T, cfg Config) *testNode {
	t.Helper()
	n, err := New(cfg, testLogger(t).With("test_node", cfg.NodeID))
	if err != nil {
		t.Fatalf("node %s: %v", cfg.NodeID, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		_ = n.Close(context.Background())
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	tn := &testNode{t: t, cfg: cfg, Node: n}
	t.Cleanup(func() { tn.stop() })
	return tn
}

// stop shuts the node down gracefully (idempotent).
func (tn *testNode) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tn.Close(ctx); err != nil {
		tn.t.Logf("close %s: %v", tn.cfg.NodeID, err)
	}
}

// restart starts the node again on the same data dir and addresses.
func (tn *testNode) restart() *testNode {
	tn.t.Helper()
	cfg := tn.cfg
	cfg.HTTPAddr, cfg.GossipAddr, cfg.RaftAddr = tn.HTTPAddr(), tn.GossipAddr(), tn.RaftAddr()
	return startNode(tn.t, cfg)
}

func (tn *testNode) client() *api.Client {
	return api.NewClient(tn.HTTPAddr(), tn.cfg.AdminToken, nil)
}

func newTestCluster(t *testing.T, n int, mutate func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	var join []string
	for i := 1; i <= n; i++ {
		cfg := testConfig(t, fmt.Sprintf("n%d", i), n, join)
		if mutate != nil {
			mutate(&cfg)
		}
		tn := startNode(t, cfg)
		if i == 1 {
			join = []string{tn.GossipAddr()}
		}
		c.nodes = append(c.nodes, tn)
	}
	c.waitReady(30 * time.Second)
	return c
}

func (c *testCluster) waitReady(timeout time.Duration) {
	c.t.Helper()
	testwait.For(c.t, timeout, "every node ready", func() bool {
		for _, n := range c.nodes {
			if ok, _ := n.ready(); !ok {
				return false
			}
		}
		return true
	})
}

// leader returns the node that is the Raft leader, waiting for one.
func (c *testCluster) leader(live []*testNode) *testNode {
	c.t.Helper()
	var l *testNode
	testwait.For(c.t, 20*time.Second, "a raft leader", func() bool {
		for _, n := range live {
			if n.store.State().String() == "Leader" {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func others(all []*testNode, not *testNode) []*testNode {
	var out []*testNode
	for _, n := range all {
		if n != not {
			out = append(out, n)
		}
	}
	return out
}
