package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
)

// newMemberlistLogger returns a *log.Logger for memberlist whose lines are
// re-emitted through logger at the level memberlist wrote in brackets.
func newMemberlistLogger(logger *slog.Logger) *log.Logger {
	return log.New(&slogWriter{logger: logger}, "", 0)
}

// slogWriter parses memberlist's "[LEVEL] memberlist: message" lines.
type slogWriter struct {
	logger *slog.Logger
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		level, msg := parseLogLine(string(line))
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
