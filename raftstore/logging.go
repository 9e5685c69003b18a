package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"fusebox/internal/logthrottle"
)

// newHCLogger returns an hclog.Logger (raft's logger type) whose output is
// re-emitted through slog. raft logs at DEBUG by default; the hclog level is
// taken from what the slog handler accepts, so with an INFO handler raft's
// debug chatter is not even formatted. Once closing is set, raft's errors
// are logged at INFO (shutdownErrors).
func newHCLogger(l *slog.Logger, name string, closing *atomic.Bool) hclog.Logger {
	ctx := context.Background()
	level := hclog.Error
	switch {
	case l.Enabled(ctx, slog.LevelDebug):
		level = hclog.Debug
	case l.Enabled(ctx, slog.LevelInfo):
		level = hclog.Info
	case l.Enabled(ctx, slog.LevelWarn):
		level = hclog.Warn
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		JSONFormat: true,
		Output:     newSlogWriter(l, closing),
	})
}

// slogWriter receives hclog's JSON lines and emits one slog record each.
// Repeated lines are rate-limited (internal/logthrottle): without quorum
// raft logs the same election lines every second or two.
type slogWriter struct {
	l  *slog.Logger
	th *logthrottle.Throttle
	// closing is the store's: set when Close begins (nil: never).
	closing *atomic.Bool
}

func newSlogWriter(l *slog.Logger, closing *atomic.Bool) *slogWriter {
	return &slogWriter{l: l, th: logthrottle.New(logthrottle.DefaultEvery, logthrottle.DefaultBurst), closing: closing}
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			w.l.Info(line)
			continue
		}
		lvl := slog.LevelInfo
		switch m["@level"] {
		case "trace", "debug":
			lvl = slog.LevelDebug
		case "warn":
			lvl = slog.LevelWarn
		case "error":
			lvl = slog.LevelError
		}
		msg, _ := m["@message"].(string)
		if lvl == slog.LevelWarn && expectedWarning(msg, m) {
			lvl = slog.LevelInfo
		}
		if lvl == slog.LevelError && w.closing != nil && w.closing.Load() {
			// shutdownErrors: the store is closing, and what raft reports
			// then is the shutdown itself — every clean stop logged
			// "failed to decode incoming command … use of closed network
			// connection" at ERROR, which alerts on error logs caught.
			lvl = slog.LevelInfo
			m["during_shutdown"] = true
		}
		ok, suppressed := w.th.Allow(lineKind(lvl, msg, m))
		if !ok {
			continue
		}
		attrs := make([]slog.Attr, 0, len(m)+1)
		if mod, ok := m["@module"].(string); ok {
			attrs = append(attrs, slog.String("module", mod))
		}
		for k, v := range m {
			if strings.HasPrefix(k, "@") {
				continue
			}
			attrs = append(attrs, slog.Any(k, v))
		}
		if suppressed > 0 {
			attrs = append(attrs, slog.Int("suppressed", suppressed))
		}
		w.l.LogAttrs(context.Background(), lvl, msg, attrs...)
	}
	return len(p), nil
}

// lineKind is the throttle's key for a raft line: its level, message and
// the attributes that name something (a peer, an address, an error), not
// the numbers that move on each retry (term, tally, index).
func lineKind(lvl slog.Level, msg string, m map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%s", lvl, msg)
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if _, num := v.(float64); num || strings.HasPrefix(k, "@") {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%v", k, m[k])
	}
	return b.String()
}

// expectedWarning: raft warns about things every cluster goes through at
// start and while a member joins — no leader known yet, a node that is not
// yet in the configuration, a new follower whose empty log the leader
// backfills, votes refused during an ordinary election. They are logged at
// INFO so that a normal start logs no WARN; the same messages after a
// leader was known (last-leader-id set) stay warnings.
func expectedWarning(msg string, m map[string]any) bool {
	switch msg {
	case "heartbeat timeout reached, starting election":
		id, _ := m["last-leader-id"].(string)
		return id == ""
	case "heartbeat timeout reached, not part of a stable configuration or a non-voter, not triggering a leader election",
		"no known peers, aborting election",
		"not part of stable configuration, aborting election",
		"failed to get previous log",
		"rejecting vote request since we have a leader",
		"rejecting pre-vote request since we have a leader",
		"rejecting vote request since node is not in configuration",
		"rejecting pre-vote request since node is not in configuration",
		"duplicate requestVote from":
		return true
	}
	return false
}
