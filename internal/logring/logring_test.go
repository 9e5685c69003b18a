package logring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestRingKeepsTheLastLinesAndTees(t *testing.T) {
	var out bytes.Buffer
	r := New(3)
	l := slog.New(r.Handler(slog.NewTextHandler(&out, nil), nil)).With("component", "test")
	for i := range 5 {
		l.Info("line", "i", i)
	}
	lines := r.Lines()
	if len(lines) != 3 {
		t.Fatalf("kept %d lines, want 3", len(lines))
	}
	for k, line := range lines {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		if m["i"] != float64(k+2) || m["component"] != "test" {
			t.Errorf("line %d = %v, want i=%d component=test (oldest first)", k, m, k+2)
		}
	}
	if got := strings.Count(out.String(), "msg=line"); got != 5 {
		t.Errorf("inner handler got %d lines, want all 5", got)
	}
	// Below the level: neither sink.
	l.Debug("hidden")
	if strings.Contains(fmt.Sprint(r.Lines()), "hidden") || strings.Contains(out.String(), "hidden") {
		t.Error("a debug line passed an INFO handler")
	}
}
