package ui_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"fusebox/internal/testwait"
	"fusebox/node"
)

// chromiumTimeout bounds one headless Chromium run.
const chromiumTimeout = 90 * time.Second

// chromium finds the browser: missing, the test fails under CI and skips
// otherwise.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (CI is set): run ui/install-chromium.sh")
	}
	t.Skip("chromium is not installed; ui/install-chromium.sh installs it (the browser test needs it)")
	return ""
}

// runChromium runs headless Chromium with args plus the common flags and
// returns its stdout. The browser runs in its own process group, killed
// whole on timeout and after it exits (its helper processes too).
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	common := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(common, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftover helpers, if any
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("chromium did not finish within %s; stderr:\n%s", chromiumTimeout, tail(stderr.String()))
	}
	if err != nil {
		t.Fatalf("chromium %v: %v; stderr:\n%s", args, err, tail(stderr.String()))
	}
	return stdout.Bytes()
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// startCluster starts n real nodes on loopback (memberlist and Raft over
// real sockets, fast timings) and waits until each is ready.
func startCluster(t *testing.T, n int) []*node.Node {
	t.Helper()
	return startClusterWith(t, n, nil)
}

// startClusterWith is startCluster with each node's Config adjusted by
// mutate (nil: none).
func startClusterWith(t *testing.T, n int, mutate func(*node.Config)) []*node.Node {
	t.Helper()
	var (
		nodes []*node.Node
		join  []string
	)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		cfg := node.Config{
			NodeID: id, DataDir: filepath.Join(t.TempDir(), id),
			HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
			Join: join, BootstrapExpect: n, Shards: node.DefaultShards, Timing: "fast", Version: "test",
		}
		if mutate != nil {
			mutate(&cfg)
		}
		nd, err := node.New(cfg, nil)
		if err != nil {
			t.Fatalf("node %s: %v", id, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = nd.Start(ctx)
		cancel()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := nd.Close(ctx); err != nil {
				t.Logf("close %s: %v", id, err)
			}
		})
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		if i == 1 {
			join = []string{nd.GossipAddr()}
		}
		nodes = append(nodes, nd)
	}
	hc := testHTTPClient(t)
	testwait.For(t, 45*time.Second, "every node ready", func() bool {
		for _, nd := range nodes {
			resp, err := hc.Get("http://" + nd.HTTPAddr() + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false
			}
		}
		return true
	})
	return nodes
}

func testHTTPClient(t *testing.T) *http.Client {
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

func find(root *html.Node, pred func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for n := range root.Descendants() {
		if n.Type == html.ElementNode && pred(n) {
			out = append(out, n)
		}
	}
	return out
}

func byID(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	ns := find(doc, func(n *html.Node) bool { return attr(n, "id") == id })
	if len(ns) != 1 {
		t.Fatalf("%d elements with id %q, want 1", len(ns), id)
	}
	return ns[0]
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

func hasAttrKey(key string) func(*html.Node) bool {
	return func(n *html.Node) bool { return hasAttr(n, key) }
}

func hasClass(c string) func(*html.Node) bool {
	return func(n *html.Node) bool { return strings.Contains(" "+attr(n, "class")+" ", " "+c+" ") }
}

// text is the node's text content, with element boundaries as spaces.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
