package raftstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// raftLines runs lines through newHCLogger's writer and returns the
// records that came out.
func raftLines(t *testing.T, lines ...string) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	out := newSlogWriter(slog.New(slog.NewJSONHandler(&buf, nil)))
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
