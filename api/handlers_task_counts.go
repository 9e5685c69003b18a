package api

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"fusebox/raftstore/state"
	"fusebox/transport"
)

// Task counts per destination (GET /v1/tasks/_counts): the status page's
// backlog, blocked and DLQ numbers (issue 16 §8).
const (
	// DefaultTaskCountsLimit and MaxTaskCountsLimit bound how many
	// destinations one answer lists (the busiest first).
	DefaultTaskCountsLimit = 20
	MaxTaskCountsLimit     = 200
	// TaskCountsMaxScan bounds each walk behind the blocked and DLQ counts
	// (state.State.DestinationCounts); past it the answer is partial.
	TaskCountsMaxScan = 200_000
)

// TaskCounter is the optional part of a TaskService that counts tasks per
// destination (raftstore/state.State has it); a task service without it serves
// no GET /v1/tasks/_counts.
type TaskCounter interface {
	DestinationCounts(maxScan int) ([]state.DestinationCount, bool)
}

// TaskCounts is GET /v1/tasks/_counts: the busiest destinations by pending
// plus dead-lettered tasks, as this node's replica of the task table holds
// them.
type TaskCounts struct {
	Destinations []DestinationTaskCount `json:"destinations"`
	// Total is how many destinations have pending or dead-lettered tasks;
	// more than len(Destinations) when the limit cut the list.
	Total int `json:"total"`
	// Partial is true when a walk stopped at its bound: the blocked and
	// DLQ counts are then lower bounds (backlog stays exact).
	Partial bool `json:"partial,omitempty"`
}

// DestinationTaskCount is one destination's tasks.
type DestinationTaskCount struct {
	Namespace string `json:"namespace"`
	// Destination is the breaker destination (a callback's scheme://host, a
	// Nexus endpoint's name), redacted like every URL the API shows.
	Destination string `json:"destination"`
	// Backlog is its pending tasks, Blocked those of them an open breaker
	// refused (Temporal's BLOCKED), DLQ its dead-lettered tasks.
	Backlog int `json:"backlog"`
	Blocked int `json:"blocked"`
	DLQ     int `json:"dlq"`
}

func (h *taskHandlers) counts(c TaskCounter) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		limit, err := intParam(r, "limit", DefaultTaskCountsLimit, 1, MaxTaskCountsLimit)
		if err != nil {
			return err
		}
		rows, partial := c.DestinationCounts(TaskCountsMaxScan)
		writeJSON(w, http.StatusOK, taskCounts(rows, partial, limit))
		return nil
	}
}

// taskCounts redacts each destination (a row stored before breaker
// destinations were recorded counts under its full URL), merges rows that
// redact alike, and keeps the limit busiest.
func taskCounts(rows []state.DestinationCount, partial bool, limit int) TaskCounts {
	type key struct{ ns, dest string }
	idx := map[key]int{}
	out := TaskCounts{Destinations: []DestinationTaskCount{}, Partial: partial}
	for _, r := range rows {
		k := key{r.Namespace, transport.RedactURL(r.Destination)}
		i, ok := idx[k]
		if !ok {
			i = len(out.Destinations)
			idx[k] = i
			out.Destinations = append(out.Destinations, DestinationTaskCount{Namespace: k.ns, Destination: k.dest})
		}
		d := &out.Destinations[i]
		d.Backlog += r.Pending
		d.Blocked += r.Blocked
		d.DLQ += r.DLQ
	}
	slices.SortStableFunc(out.Destinations, func(a, b DestinationTaskCount) int {
		return cmp.Compare(b.Backlog+b.DLQ, a.Backlog+a.DLQ)
	})
	out.Total = len(out.Destinations)
	if len(out.Destinations) > limit {
		out.Destinations = out.Destinations[:limit]
	}
	return out
}

// TaskCounts is GET /v1/tasks/_counts: the limit busiest destinations (0:
// the server's default).
func (c *Client) TaskCounts(ctx context.Context, limit int) (TaskCounts, error) {
	var v url.Values
	if limit > 0 {
		v = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var out TaskCounts
	return out, c.Do(ctx, http.MethodGet, "/v1/tasks/_counts", v, nil, &out)
}
