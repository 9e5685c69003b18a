package node

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
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
