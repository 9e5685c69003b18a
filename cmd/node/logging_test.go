package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestOneComponentPerLine(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(newOneComponent(slog.NewTextHandler(&buf, nil)))
	l = l.With("node", "n1")
	gossip := l.With("component", "gossip")
	gossip.Info("joined", "peers", 2)
	gossip.Info("suspect", "component", "memberlist")
	gossip.With("component", "hints").Info("published")
	l.Info("plain")
	for i, want := range []string{"component=gossip", "component=memberlist", "component=hints", ""} {
		line := strings.Split(strings.TrimSpace(buf.String()), "\n")[i]
		if n := strings.Count(line, "component="); (want == "" && n != 0) || (want != "" && (n != 1 || !strings.Contains(line, want))) {
			t.Errorf("line %d %q: want exactly %q once", i, line, want)
		}
		if !strings.Contains(line, "node=n1") {
			t.Errorf("line %d %q lost node=n1", i, line)
		}
	}
}

// --shutdown-timeout 0 or less is refused naming the flag: read as "no
// limit" it stopped every node at once, as a crash (exit 1, no hand-over,
// calls made again).
func TestServeRefusesNonPositiveShutdownTimeout(t *testing.T) {
	for _, v := range []string{"0s", "-5s"} {
		_, err := runCLI(t, t.Context(), "serve", "--data-dir", t.TempDir(), "--shutdown-timeout", v)
		if err == nil || !strings.Contains(err.Error(), "--shutdown-timeout") {
			t.Fatalf("--shutdown-timeout %s: %v; want an error naming the flag", v, err)
		}
	}
}
