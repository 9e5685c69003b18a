package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"

	"fusebox/internal/logthrottle"
)

// newMemberlistLogger returns a *log.Logger for memberlist whose lines are
// re-emitted through logger at the level memberlist wrote in brackets.
func newMemberlistLogger(logger *slog.Logger) *log.Logger {
	return log.New(&slogWriter{logger: logger, th: logthrottle.New(logthrottle.DefaultEvery, logthrottle.DefaultBurst)}, "", 0)
}

// slogWriter parses memberlist's "[LEVEL] memberlist: message" lines.
// Repeated lines (the same level and text: a peer that stays unreachable)
// are rate-limited (internal/logthrottle).
type slogWriter struct {
	logger *slog.Logger
	th     *logthrottle.Throttle
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		level, msg := parseLogLine(string(line))
		ok, suppressed := w.th.Allow(level.String() + "|" + msg)
		if !ok {
			continue
		}
		if suppressed > 0 {
			w.logger.Log(context.Background(), level, msg, "component", "memberlist", "suppressed", suppressed)
			continue
		}
		w.logger.Log(context.Background(), level, msg, "component", "memberlist")
	}
	return len(p), nil
}

// parseLogLine splits "[WARN] memberlist: text" into a level and "text".
// Lines without a recognised level are logged at Info.
func parseLogLine(line string) (slog.Level, string) {
	level := slog.LevelInfo
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			switch line[1:end] {
			case "DEBUG", "TRACE":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN", "WARNING":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			line = strings.TrimSpace(line[end+1:])
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}
