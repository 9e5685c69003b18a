package node

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/logring"
	"fusebox/internal/testwait"
)

// lockedBuffer is a goroutine-safe log sink.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNormalStartLogsNoWarn starts a 3-node cluster, waits until it is
// ready, and finds no WARN or ERROR line in any node's log: the warnings
// raft and memberlist print on every start are demoted at the bridges.
func TestNormalStartLogsNoWarn(t *testing.T) {
	bufs := map[string]*lockedBuffer{}
	var join []string
	var nodes []*testNode
	for _, id := range []string{"n1", "n2", "n3"} {
		cfg := testConfig(t, id, 3, join)
		buf := &lockedBuffer{}
		bufs[id] = buf
		n, err := New(cfg, slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			_ = n.Close(context.Background())
			t.Fatal(err)
		}
		tn := &testNode{t: t, cfg: cfg, Node: n}
		t.Cleanup(tn.stop)
		nodes = append(nodes, tn)
		if id == "n1" {
			join = []string{n.GossipAddr()}
		}
	}
	c := &testCluster{t: t, nodes: nodes}
	c.waitReady(30 * time.Second)
	for id, buf := range bufs {
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Errorf("%s logged at start: %s", id, line)
			}
		}
		if !strings.Contains(buf.String(), "node started") {
			t.Errorf("%s: no 'node started' line: the log capture is broken", id)
		}
	}
}

// TestDebugLogsRouteRedacted: GET /v1/debug/logs serves the ring's lines to
// an admin only, and the lines from delivering a callback that carries an
// Authorization header and a ?sig= query to a failing destination contain
// neither secret.
func TestDebugLogsRouteRedacted(t *testing.T) {
	const hdrSecret, sigSecret = "hdr-secret-9f2c71", "sig-secret-4be810"
	var hits atomic.Int64
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable) // down: retried and logged
	}))
	t.Cleanup(dest.Close)
	ring := logring.New(0)
	cfg := testConfig(t, "n1", 1, nil)
	cfg.AdminToken = "admin-token-0123456789abcdef0123456789"
	cfg.Logs = ring
	logger := slog.New(ring.Handler(slog.DiscardHandler, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		_ = n.Close(context.Background())
		t.Fatal(err)
	}
	tn := &testNode{t: t, cfg: cfg, Node: n}
	t.Cleanup(tn.stop)
	c := &testCluster{t: t, nodes: []*testNode{tn}}
	c.waitReady(20 * time.Second)

	ctx := context.Background()
	_, err = tn.client().SubmitTask(ctx, api.TaskSubmit{
		NamespaceID: "ns", WorkflowID: "wf", TaskGroup: breakerpool.TaskGroupCallback,
		Destination: dest.URL + "/cb?sig=" + sigSecret,
		Request: api.TaskRequest{Body: []byte("x"), ContentType: "text/plain",
			Header: map[string]string{"Authorization": "Bearer " + hdrSecret}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "two delivery attempts", func() bool { return hits.Load() >= 2 })

	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+tn.HTTPAddr()+"/v1/debug/logs", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", code)
	}
	code, body := get(cfg.AdminToken)
	if code != http.StatusOK || !strings.Contains(body, "node started") {
		t.Fatalf("admin: %d; want 200 with the start line; got %d bytes", code, len(body))
	}
	t.Logf("%d recent lines", strings.Count(body, "\n"))
	// The Go client's ?limit keeps the newest lines (the node may have
	// logged more since, so only their count and form are checked).
	var last bytes.Buffer
	if _, err := tn.client().DebugLogs(ctx, 2, &last); err != nil || strings.Count(last.String(), "\n") != 2 ||
		!strings.HasPrefix(last.String(), "{") {
		t.Fatalf("DebugLogs(limit 2) = %q, %v; want 2 JSON lines", last.String(), err)
	}
	for _, s := range []string{hdrSecret, sigSecret, cfg.AdminToken} {
		if strings.Contains(body, s) {
			t.Errorf("recent log lines contain the secret %q", s)
		}
	}
}
