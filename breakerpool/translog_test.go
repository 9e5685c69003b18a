package breakerpool

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/testwait"
)

// lockedBuffer is a log sink safe for the observer goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// records returns the JSON records logged with msg.
func (l *lockedBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(l.b.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// TestTransitionLogsWarnWithNexusStage: every transition is one WARN record
// with Temporal's message and tags; the nexus-stage tag names the side of
// the Nexus call (caller-outbound for start/cancel, handler-outbound for
// callbacks).
func TestTransitionLogsWarnWithNexusStage(t *testing.T) {
	src, err := NewStaticSource(fastSettings())
	if err != nil {
		t.Fatal(err)
	}
	var sink lockedBuffer
	log := slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := New(Config{DisableJitter: true}, src, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(p.Close)

	cb := Key{TaskGroup: TaskGroupCallback, NamespaceID: "ns1", Destination: "https://cb.example:8443"}
	trip(t, p.Get(keyA))
	trip(t, p.Get(cb))
	testwait.For(t, 5*time.Second, "the condition", func() bool { return len(sink.records(t, TransitionLogMessage)) >= 2 })

	want := map[string]string{keyA.Destination: NexusStageCaller, cb.Destination: NexusStageHandler}
	for _, r := range sink.records(t, TransitionLogMessage) {
		if r["level"] != "WARN" {
			t.Errorf("level %v, want WARN: %v", r["level"], r)
		}
		d, _ := r["destination"].(string)
		stage, ok := want[d]
		if !ok {
			t.Fatalf("unexpected record %v", r)
		}
		if r["nexus-stage"] != stage || r["from-state"] != "closed" || r["to-state"] != "open" || r["source"] != string(SourceLocal) {
			t.Errorf("record %v: want nexus-stage %s, closed → open, source local", r, stage)
		}
		if r["key"] == nil || r["task-group"] == nil || r["wf-namespace-id"] != "ns1" {
			t.Errorf("record %v lacks key, task-group or wf-namespace-id", r)
		}
		delete(want, d)
	}
	if len(want) > 0 {
		t.Errorf("no transition record for %v", want)
	}
	if NexusStage("other.Group") != "" {
		t.Error("a task group outside Nexus must get no nexus-stage")
	}
}
