package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// raftLines runs lines through newHCLogger's writer and returns the
// records that came out.
func raftLines(t *testing.T, lines ...string) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	out := newSlogWriter(slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	for _, l := range lines {
		if _, err := out.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		recs = append(recs, m)
	}
	return recs
}

func TestRaftRepeatsThrottled(t *testing.T) {
	var lines []string
	for term := 3; term < 23; term++ { // 20 elections without quorum
		lines = append(lines,
			`{"@level":"warn","@message":"Election timeout reached, restarting election","@module":"raft"}`,
			fmt.Sprintf(`{"@level":"info","@message":"entering candidate state","@module":"raft","term":%d}`, term),
			`{"@level":"error","@message":"failed to make requestVote RPC","@module":"raft","target":"n2","error":"dial tcp: connection refused"}`,
			`{"@level":"error","@message":"failed to make requestVote RPC","@module":"raft","target":"n3","error":"dial tcp: connection refused"}`)
	}
	count := map[string]int{}
	for _, r := range raftLines(t, lines...) {
		key := r["msg"].(string)
		if tg, ok := r["target"].(string); ok {
			key += " " + tg
		}
		count[key]++
	}
	want := map[string]int{
		"Election timeout reached, restarting election": 3,
		"entering candidate state":                      3, // a new term is the same kind of line
		"failed to make requestVote RPC n2":             3, // each peer is its own kind
		"failed to make requestVote RPC n3":             3,
	}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%q logged %d times, want %d (all: %v)", k, count[k], n, count)
		}
	}
}

func TestRaftDistinctLinesPass(t *testing.T) {
	var lines []string
	for i := 2; i <= 9; i++ { // a leader of nine starting replication
		lines = append(lines, fmt.Sprintf(`{"@level":"info","@message":"added peer, starting replication","@module":"raft","peer":"n%d"}`, i))
	}
	if got := len(raftLines(t, lines...)); got != 8 {
		t.Fatalf("%d of 8 distinct lines logged", got)
	}
}

// levelRecorder is a slog handler that keeps each record's level and
// message.
type levelRecorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *levelRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *levelRecorder) WithGroup(string) slog.Handler      { return r }

func (r *levelRecorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.recs {
		if strings.HasPrefix(l, "ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// A clean Close logs no ERROR: raft's complaints once the store is
// closing are the shutdown's (its own connections closed under it), and
// every stop logged "failed to decode incoming command … use of closed
// network connection" at ERROR, which alerts on error logs caught.
func TestCloseLogsNoRaftError(t *testing.T) {
	recs := map[string]*levelRecorder{"n1": {}, "n2": {}, "n3": {}}
	c := newTestCluster(t, func(cfg *Config) { cfg.Logger = slog.New(recs[cfg.NodeID]) })
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	leader := c.leader(10 * time.Second)
	// A follower: the leader's replication connections to it are open.
	victim := "n1"
	for _, id := range []string{"n1", "n2", "n3"} {
		if c.nodes[id] != leader {
			victim = id
			break
		}
	}
	if errs := recs[victim].errors(); len(errs) > 0 {
		t.Fatalf("errors before Close: %v", errs)
	}
	if err := c.nodes[victim].Close(); err != nil {
		t.Fatal(err)
	}
	if errs := recs[victim].errors(); len(errs) > 0 {
		t.Fatalf("a clean Close logged errors: %v", errs)
	}
}
