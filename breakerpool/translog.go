package breakerpool

import (
	"context"
	"log/slog"
)

// TransitionLogMessage is the message of the WARN record written for every
// breaker state transition: Temporal's text (service/history/circuitbreakerpool,
// onStateChange), so log queries written for Temporal's outbound queue find
// fusebox's transitions too.
const TransitionLogMessage = "outbound queue circuit breaker state change"

// Nexus stages, Temporal's "nexus-stage" log tag: the side of a Nexus call a
// task group's outbound request is on.
const (
	NexusStageCaller  = "caller-outbound"  // Nexus start and cancel requests
	NexusStageHandler = "handler-outbound" // completion callbacks
)

// NexusStage returns the "nexus-stage" tag of a task group, "" for a task
// group that is not part of a Nexus call.
func NexusStage(taskGroup string) string {
	switch taskGroup {
	case TaskGroupNexusInvocation, TaskGroupNexusCancelation:
		return NexusStageCaller
	case TaskGroupCallback:
		return NexusStageHandler
	}
	return ""
}

// logTransition writes the WARN record of a state transition with
// Temporal's tags (task-group, wf-namespace-id, destination, nexus-stage,
// from-state, to-state) and fusebox's own (key, source, generation,
// open_for). The destination is the breaker key's: an endpoint name or a
// callback's scheme://host, never a URL path or query.
func logTransition(log *slog.Logger, t Transition) {
	if !log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	attrs := make([]slog.Attr, 0, 11)
	attrs = append(attrs,
		slog.String("key", t.Key.String()),
		slog.String("task-group", t.Key.TaskGroup),
		slog.String("wf-namespace-id", t.Key.NamespaceID),
		slog.String("destination", t.Key.Destination))
	if stage := NexusStage(t.Key.TaskGroup); stage != "" {
		attrs = append(attrs, slog.String("nexus-stage", stage))
	}
	attrs = append(attrs,
		slog.String("from-state", t.From.String()),
		slog.String("to-state", t.To.String()),
		slog.String("source", string(t.Source)),
		slog.Uint64("generation", t.Generation))
	if t.OpenFor > 0 {
		attrs = append(attrs, slog.Duration("open_for", t.OpenFor))
	}
	if !t.RetryUntil.IsZero() {
		attrs = append(attrs, slog.Time("retry_after_until", t.RetryUntil))
	}
	log.LogAttrs(context.Background(), slog.LevelWarn, TransitionLogMessage, attrs...)
}
