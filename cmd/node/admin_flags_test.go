package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Errors name the flag a person typed, not the API's JSON field: a value
// the CLI can check itself is bad usage (exit 2, nothing sent); what only
// the cluster can refuse stays exit 3, with the field named by its flag.
func TestAdminFlagErrorsNameTheFlag(t *testing.T) {
	h := newAdminNode(t, 4)
	submit := func(extra ...string) []string {
		args := []string{"tasks", "submit", "--namespace", "ns", "--workflow", "wf", "--task-group", "callbacks.Invocation",
			"--destination", "http://127.0.0.1:9/cb", "--request", `{"completion":{"state":"succeeded"}}`}
		return append(args, extra...)
	}
	noFlag := func(args []string, flag string) []string {
		var out []string
		for i := 0; i < len(args); i++ {
			if args[i] == flag {
				i++
				continue
			}
			out = append(out, args[i])
		}
		return out
	}
	h.mustRun("accepted", submit()...)

	// Checked here: exit 2 naming the flag.
	h.wantExit(2, "--schedule-to-close", submit("--schedule-to-close", "abc")...)
	h.wantExit(2, "--schedule-to-close", submit("--schedule-to-close", "-5s")...)
	h.wantExit(2, "--schedule-to-close: must be at most", submit("--schedule-to-close", "9999d")...)
	for flag := range map[string]bool{"--namespace": true, "--workflow": true, "--task-group": true, "--destination": true} {
		h.wantExit(2, flag+": required", noFlag(submit(), flag)...)
	}
	// A field the --file left out names the file's field and the flag.
	file := filepath.Join(t.TempDir(), "task.json")
	if err := os.WriteFile(file, []byte(`{"workflow_id":"wf","task_group":"callbacks.Invocation","destination":"http://127.0.0.1:9/cb","request":{"completion":{"state":"succeeded"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.wantExit(2, "--namespace (namespace_id in --file): required", "tasks", "submit", "--file", file)
	h.wantExit(2, "--task-group", "breakers", "force", "open", "--destination", "x")
	h.wantExit(2, "--destination", "breakers", "force", "open", "--task-group", "callbacks.Invocation")
	h.wantExit(2, "--duration", "breakers", "force", "open", "--task-group", "callbacks.Invocation", "--destination", "x", "--duration", "soon")
	h.wantExit(2, "--status", "tasks", "list", "--status", "done")

	// Refused by the cluster: exit 3, the field named by its flag.
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(noFlag(submit(), "--task-group"), "--task-group", "nexusoperations.Invocation", "--destination", "no-such-endpoint"), "--destination: unknown nexus endpoint"},
		{append(submit(), "--request", `{"content_type":"text/plain"}`), "--request (completion): a callback needs"},
		{[]string{"breakers", "force", "open", "--task-group", "callbacks.Invocation", "--destination", "x", "--duration", "9999h"}, "--duration: "},
		{[]string{"tasks", "list", "--shard", "99999999"}, "--shard: "},
	} {
		out, err := h.run(c.args...)
		if exitCode(err) != 3 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: exit %d, %v (%s); want exit 3 with %q", c.args, exitCode(err), err, out, c.want)
		}
	}
}
