package tasks

import (
	"time"

	"fusebox/dynconfig"
	"fusebox/transport"
)

// ScheduleToCloser resolves a task's schedule-to-close timeout from dynamic
// config (node.TaskAPI: dynconfig's Snapshot.ScheduleToClose). An Env
// without it keeps what the submit asked for.
type ScheduleToCloser interface {
	ScheduleToClose(taskGroup, namespace, destination string, requested time.Duration) time.Duration
}

// deadline fixes a submitted task's schedule-to-close deadline: at (the
// submitting node's clock, the command's time) plus the timeout asked for,
// or the configured default, capped for Nexus tasks. Zero: no deadline. It
// is absolute and stored in the task, so every replica agrees on it.
func deadline(env Env, in *Submit, at time.Time) (time.Time, error) {
	var requested time.Duration
	if in.ScheduleToCloseTimeout != "" {
		d, err := dynconfig.ParseDuration(in.ScheduleToCloseTimeout)
		const field = "schedule_to_close_timeout"
		switch {
		case err != nil:
			return time.Time{}, badField(field, "invalid duration %q: want a duration such as \"30s\", \"2h\" or \"1d\" (unitless: seconds)", TruncateRunes(in.ScheduleToCloseTimeout, 64))
		case d <= 0:
			return time.Time{}, badField(field, "must be positive, got %v (omit it for the default)", d)
		case d > dynconfig.MaxScheduleToCloseTimeout:
			return time.Time{}, badField(field, "must be at most %v, got %v", dynconfig.MaxScheduleToCloseTimeout, d)
		}
		requested = d
	}
	d := requested
	if s, ok := env.(ScheduleToCloser); ok {
		d = s.ScheduleToClose(in.TaskGroup, in.NamespaceID, transport.BreakerDestination(in.TaskGroup, in.Destination), requested)
	}
	if d <= 0 {
		return time.Time{}, nil
	}
	return at.Add(d), nil
}

// TruncateRunes shortens untrusted text for an error message.
func TruncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
