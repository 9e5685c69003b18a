package main

import (
	"context"
	"log/slog"
)

// oneComponent is an slog.Handler that keeps a single "component"
// attribute per record: the innermost one. Child loggers add their own
// component on top of the one their parent was given (gossip → memberlist,
// raftstore → raft-tls, queue → queue); slog never removes an attribute, so
// without this a line carried component twice. Attributes are held here
// and handed to the inner handler with each record.
type oneComponent struct {
	inner slog.Handler
	attrs []slog.Attr // logger attributes, at most one "component"
}

func newOneComponent(h slog.Handler) slog.Handler { return &oneComponent{inner: h} }

func (h *oneComponent) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *oneComponent) WithAttrs(as []slog.Attr) slog.Handler {
	out := &oneComponent{inner: h.inner, attrs: make([]slog.Attr, 0, len(h.attrs)+len(as))}
	replace := hasComponent(as)
	for _, a := range h.attrs {
		if !(replace && a.Key == "component") {
			out.attrs = append(out.attrs, a)
		}
	}
	out.attrs = append(out.attrs, as...)
	return out
}

// WithGroup hands the attributes so far to the inner handler: a component
// inside a group is a different key.
func (h *oneComponent) WithGroup(name string) slog.Handler {
	return &oneComponent{inner: h.inner.WithAttrs(h.attrs).WithGroup(name)}
}

func (h *oneComponent) Handle(ctx context.Context, r slog.Record) error {
	var own []slog.Attr
	r.Attrs(func(a slog.Attr) bool { own = append(own, a); return true })
	replace := hasComponent(own)
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	for _, a := range h.attrs {
		if !(replace && a.Key == "component") {
			nr.AddAttrs(a)
		}
	}
	seen := false
	for i := len(own) - 1; i >= 0; i-- { // the last component of the record wins
		if own[i].Key == "component" {
			if seen {
				own = append(own[:i], own[i+1:]...)
			}
			seen = true
		}
	}
	nr.AddAttrs(own...)
	return h.inner.Handle(ctx, nr)
}

func hasComponent(as []slog.Attr) bool {
	for _, a := range as {
		if a.Key == "component" {
			return true
		}
	}
	return false
}
