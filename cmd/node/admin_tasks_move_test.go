package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func exportLine(i int) string {
	return fmt.Sprintf(`{"v":1,"id":"%032x","namespace_id":"ns","workflow_id":"wf-%d","task_group":"callbacks.Invocation","destination":"http://x/cb","request":{},"attempts":1,"created_at":"2026-01-02T03:00:00Z","shard":0}`, i, i)
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The CLI side of tasks import (the whole move runs on real processes in
// e2e TestMoveTasksToPostgres): the file is sent in batches of --batch,
// blank lines skipped; a line that is not an exported task is exit 2
// naming the line.
func TestAdminTasksImportLines(t *testing.T) {
	line, write := exportLine, func(_ string, lines ...string) string { return writeLines(t, lines...) }
	good := write("good.jsonl", line(1), "", line(2), line(3), line(4), line(5))
	rec, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"POST /v1/tasks:import": {status: 200, body: `{"results":[{"task_id":"a","outcome":"accepted"},{"task_id":"b","outcome":"duplicate"}]}`},
	})
	out, err := runAdmin(t, addr, tasksCmd, "tasks", "import", "--input", good, "--batch", "2")
	if err != nil || !strings.Contains(out, "imported 6 task(s): 3 added, 3 already there") {
		t.Fatalf("import = %q, %v", out, err)
	}
	if n := rec.count(); n != 3 {
		t.Fatalf("%d import calls for 5 tasks in batches of 2, want 3", n)
	}
	var last struct{ Tasks []json.RawMessage }
	if err := json.Unmarshal(rec.last(t).body, &last); err != nil || len(last.Tasks) != 1 {
		t.Fatalf("last batch = %s, %v", rec.last(t).body, err)
	}

	bad := write("bad.jsonl", line(1), `{"v":1,"nope":true}`)
	if _, err := runAdmin(t, addr, tasksCmd, "tasks", "import", "--input", bad); exitCode(err) != 2 || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("malformed line: %v (exit %d)", err, exitCode(err))
	}
}

// A task the cluster refuses is exit 3 naming the file's line (not the
// batch index) and the field.
func TestAdminTasksImportRefusedLine(t *testing.T) {
	line, write := exportLine, func(_ string, lines ...string) string { return writeLines(t, lines...) }
	_, addr := newAPIRecorder(t, map[string]cannedAnswer{
		"POST /v1/tasks:import": {status: 400, body: `{"error":{"code":"invalid_argument","field":"tasks[1].destination","message":"unknown nexus endpoint \"ep\""}}`},
	})
	refused := write("refused.jsonl", line(1), "", line(2))
	_, err := runAdmin(t, addr, tasksCmd, "tasks", "import", "--input", refused)
	if exitCode(err) != 3 || !strings.Contains(err.Error(), "--input line 3 (destination)") || !strings.Contains(err.Error(), "unknown nexus endpoint") {
		t.Fatalf("refused task: %v (exit %d)", err, exitCode(err))
	}
}
