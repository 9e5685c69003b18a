package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"fusebox/raftstore/state"
)

// TestTaskCountsRoute: GET /v1/tasks/_counts counts each destination's
// backlog, blocked and dead-lettered tasks from the real task table,
// busiest first, redacted, bounded by limit.
func TestTaskCountsRoute(t *testing.T) {
	svc, c := newTaskServer(t)
	ctx := t.Context()
	var ids []string
	for i := range 5 {
		acc, err := c.SubmitTask(ctx, callback("ns", fmt.Sprintf("wf-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, acc.TaskID)
	}
	other := callback("ns2", "wf-other")
	other.Destination = "http://127.0.0.1:8/cb?token=secret"
	if _, err := c.SubmitTask(ctx, other); err != nil {
		t.Fatal(err)
	}
	m := svc.ShardMap()
	complete := func(id string, r state.TaskResult) {
		tk, _ := svc.Task(id)
		r.TaskID = id
		if _, err := svc.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: tk.Shard, Epoch: m.Shards[tk.Shard].Epoch, Node: "n1",
			Results: []state.TaskResult{r}}); err != nil {
			t.Fatal(err)
		}
	}
	complete(ids[0], state.TaskResult{Status: state.TaskDLQ, Attempts: 2, Message: "poison"})
	complete(ids[1], state.TaskResult{Status: state.TaskPending, Attempts: 1, Blocked: 1, NextAttemptAt: time.Now().Add(time.Hour)})

	got, err := c.TaskCounts(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []DestinationTaskCount{
		{Namespace: "ns", Destination: "http://127.0.0.1:9", Backlog: 4, Blocked: 1, DLQ: 1},
		{Namespace: "ns2", Destination: "http://127.0.0.1:8", Backlog: 1},
	}
	if got.Total != 2 || got.Partial || fmt.Sprint(got.Destinations) != fmt.Sprint(want) {
		t.Fatalf("counts = %+v, want %+v", got, want)
	}
	if got, err := c.TaskCounts(ctx, 1); err != nil || got.Total != 2 || len(got.Destinations) != 1 || got.Destinations[0].Namespace != "ns" {
		t.Fatalf("counts limit 1 = %+v, %v; want the busiest of 2", got, err)
	}
	err = c.Do(ctx, http.MethodGet, "/v1/tasks/_counts", map[string][]string{"limit": {"0"}}, nil, nil)
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "limit")
}
