package api

import (
	"time"

	"fusebox/dynconfig"
	"fusebox/transport"
)

// scheduleToCloser resolves a task's schedule-to-close timeout from dynamic
// config (node.TaskAPI: dynconfig's Snapshot.ScheduleToClose). A
// TaskService without it keeps what the submit asked for.
type scheduleToCloser interface {
	ScheduleToClose(taskGroup, namespace, destination string, requested time.Duration) time.Duration
}

// deadline fixes a submitted task's schedule-to-close deadline: at (the
// submitting node's clock, the command's time) plus the timeout asked for,
// or the configured default, capped for Nexus tasks. Zero: no deadline. It
// is absolute and stored in the task, so every replica agrees on it.
func (h *taskHandlers) deadline(in *TaskSubmit, at time.Time, prefix string) (time.Time, error) {
	var requested time.Duration
	if in.ScheduleToCloseTimeout != "" {
		d, err := dynconfig.ParseDuration(in.ScheduleToCloseTimeout)
		field := prefix + "schedule_to_close_timeout"
		switch {
		case err != nil:
			return time.Time{}, BadField(field, "invalid duration %q: want a duration such as \"30s\", \"2h\" or \"1d\" (unitless: seconds)", truncateRunes(in.ScheduleToCloseTimeout, 64))
		case d <= 0:
			return time.Time{}, BadField(field, "must be positive, got %v (omit it for the default)", d)
		case d > dynconfig.MaxScheduleToCloseTimeout:
			return time.Time{}, BadField(field, "must be at most %v, got %v", dynconfig.MaxScheduleToCloseTimeout, d)
		}
		requested = d
	}
	d := requested
	if s, ok := h.svc.(scheduleToCloser); ok {
		d = s.ScheduleToClose(in.TaskGroup, in.NamespaceID, transport.BreakerDestination(in.TaskGroup, in.Destination), requested)
	}
	if d <= 0 {
		return time.Time{}, nil
	}
	return at.Add(d), nil
}

// truncateRunes shortens untrusted text for an error message.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
