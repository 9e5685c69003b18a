package main

import (
	"encoding/json"
	"testing"
)

// --schedule-to-close is sent as the submit's schedule_to_close_timeout.
func TestAdminTasksSubmitScheduleToClose(t *testing.T) {
	rec, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"POST /v1/tasks": {status: 202, body: `{"task_id":"t-1","shard":2}`},
	})
	if _, err := runAdmin(t, addr, tasksCmd, "tasks", "submit", "--namespace", "ns", "--workflow", "wf",
		"--task-group", "callbacks.Invocation", "--destination", "http://x/cb", "--schedule-to-close", "1d"); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.last(t).body, &body); err != nil {
		t.Fatal(err)
	}
	if body["schedule_to_close_timeout"] != "1d" {
		t.Fatalf("sent body = %s", rec.last(t).body)
	}
}
