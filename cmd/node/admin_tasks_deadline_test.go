package main

import (
	"encoding/json"
	"strings"
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

// A --schedule-to-close that is no duration, or a required flag left out,
// is bad usage naming the flag: exit 2, nothing sent.
func TestAdminTasksSubmitChecksFlagsLocally(t *testing.T) {
	rec, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"POST /v1/tasks": {status: 202, body: `{"task_id":"t-1","shard":2}`},
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--namespace", "ns", "--workflow", "wf", "--task-group", "callbacks.Invocation", "--destination", "http://x/cb", "--schedule-to-close", "abc"},
			`--schedule-to-close: invalid duration "abc"`},
		{[]string{"--workflow", "wf", "--task-group", "callbacks.Invocation", "--destination", "http://x/cb"}, "--namespace: required"},
	} {
		_, err := runAdmin(t, addr, tasksCmd, append([]string{"tasks", "submit"}, c.args...)...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) || rec.count() != 0 {
			t.Errorf("%v: exit %d, %v, %d requests sent; want exit 2 with %q and none sent", c.args, exitCode(err), err, rec.count(), c.want)
		}
	}
}
