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

// The export file is mode 0600 even when a file of another mode was there
// (it holds the stored secrets): it is written beside it and renamed over
// it.
func TestAdminTasksExportFileMode(t *testing.T) {
	const secret = "Bearer export-secret-5a5a"
	page := fmt.Sprintf(`{"tasks":[{"v":1,"id":"%032x","namespace_id":"ns","workflow_id":"wf","task_group":"callbacks.Invocation","destination":"http://x/cb?sig=s","request":{"header":{"Authorization":%q}},"attempts":1,"created_at":"2026-01-02T03:00:00Z","shard":0}]}`, 1, secret)
	_, addr := newAPIRecorder(t, map[string]cannedAnswer{"GET /v1/tasks:export": {status: 200, body: page}})
	dir := t.TempDir()
	out := filepath.Join(dir, "pending.jsonl")
	if err := os.WriteFile(out, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if _, err := runAdmin(t, addr, tasksCmd, "tasks", "export", "--output", out); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("export file mode %v, %v; want 0600", st.Mode(), err)
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "export-secret-5a5a") || strings.Contains(string(b), "old") {
		t.Fatalf("export file holds %q; want the exported task only", b)
	}
}

// A failed export leaves the file that was there as it was, and no
// temporary file beside it.
func TestAdminTasksExportFailedKeepsFile(t *testing.T) {
	_, failing := newAPIRecorder(t, map[string]cannedAnswer{"GET /v1/tasks:export": {status: 500, body: `{"error":{"code":"internal","message":"boom"}}`}})
	dir := t.TempDir()
	out := filepath.Join(dir, "pending.jsonl")
	if err := os.WriteFile(out, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runAdmin(t, failing, tasksCmd, "tasks", "export", "--output", out); err == nil {
		t.Fatal("an export the node failed succeeded")
	}
	if b, _ := os.ReadFile(out); string(b) != "old\n" {
		t.Errorf("after a failed export the file holds %q; want it as it was", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left in the directory: %v", ents)
	}
}
