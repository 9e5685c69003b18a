package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestMemberlistRepeatsThrottled(t *testing.T) {
	var buf bytes.Buffer
	l := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 10 {
		l.Print("[ERR] memberlist: Failed to send UDP ping: write udp 127.0.0.1:1->127.0.0.1:2: connection refused")
		l.Print("[INFO] memberlist: Suspect n2 has failed, no acks received")
		l.Print("[INFO] memberlist: Suspect n3 has failed, no acks received")
	}
	out := buf.String()
	for _, m := range []string{"Failed to send UDP ping", "Suspect n2", "Suspect n3"} {
		if n := strings.Count(out, m); n != 3 {
			t.Errorf("%q logged %d times of 10, want 3 (a burst of three, then one per 30 s)\n%s", m, n, out)
		}
	}
}
