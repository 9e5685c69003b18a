// Package logring keeps a node's most recent log lines in memory, for the
// debug bundle (GET /v1/debug/logs): an slog.Handler that tees every record
// into the process's normal handler and into a bounded ring of JSON lines.
package logring

import (
	"context"
	"log/slog"
	"sync"
)

// DefaultSize is how many records a Ring keeps by default.
const DefaultSize = 2000

// Ring holds the last N log lines (JSON, one record each). Safe for
// concurrent use; the zero value is not usable, use New.
type Ring struct {
	mu    sync.Mutex
	lines [][]byte
	next  int
	full  bool
}

// New returns a ring of size lines (DefaultSize when size <= 0).
func New(size int) *Ring {
	if size <= 0 {
		size = DefaultSize
	}
	return &Ring{lines: make([][]byte, size)}
}

// Write stores one line: slog's handlers write each record with one Write.
func (r *Ring) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
	return len(p), nil
}

// Lines returns the kept lines, oldest first, each ending in a newline.
func (r *Ring) Lines() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	if r.full {
		out = append(out, r.lines[r.next:]...)
	}
	return append(out, r.lines[:r.next]...)
}

// Handler returns a handler that passes every record to inner and also
// writes it, as JSON, into r. opts (level, ReplaceAttr) applies to the ring.
func (r *Ring) Handler(inner slog.Handler, opts *slog.HandlerOptions) slog.Handler {
	return tee{inner, slog.NewJSONHandler(r, opts)}
}

type tee struct{ a, b slog.Handler }

func (t tee) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}

func (t tee) Handle(ctx context.Context, rec slog.Record) error {
	var err error
	if t.a.Enabled(ctx, rec.Level) {
		err = t.a.Handle(ctx, rec.Clone())
	}
	if t.b.Enabled(ctx, rec.Level) {
		_ = t.b.Handle(ctx, rec)
	}
	return err
}

func (t tee) WithAttrs(as []slog.Attr) slog.Handler { return tee{t.a.WithAttrs(as), t.b.WithAttrs(as)} }
func (t tee) WithGroup(n string) slog.Handler       { return tee{t.a.WithGroup(n), t.b.WithGroup(n)} }
