package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/queue"
)

// Issue 20 §6 on a real process, through the real CLI: a Temporal
// dynamic-config file imported with --dry-run, then for real, and refused
// whole when one value is bad; a task to a destination answering 302
// forever, submitted with --schedule-to-close 2, ends failed "deadline
// exceeded".
func TestTemporalConfigImportAndDeadline(t *testing.T) {
	p := startSingle(t)
	addr := p.HTTPAddr()
	good := filepath.Join("..", "..", "dynconfig", "testdata", "temporal-dynamicconfig.yaml")
	bad := filepath.Join("..", "..", "dynconfig", "testdata", "temporal-dynamicconfig-bad.yaml")

	out, code := runBin(t, nil, "admin", "--addr", addr, "config", "import", good, "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run: nothing written") || !strings.Contains(out, "limit.maxIDLength") {
		t.Fatalf("import --dry-run: exit %d\n%s", code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l, err := p.Client().ConfigList(ctx); err != nil || len(l.Entries) != 0 {
		t.Fatalf("the dry run wrote: %+v, %v", l.Entries, err)
	}
	out, code = runBin(t, nil, "admin", "--addr", addr, "config", "import", good)
	if code != 0 || !strings.Contains(out, "imported at raft index") {
		t.Fatalf("import: exit %d\n%s", code, out)
	}
	if es, err := p.Client().ConfigGet(ctx, dynconfig.KeyTaskDLQUnexpectedErrorAttempts); err != nil || len(es) != 1 || string(es[0].Value) != "20" {
		t.Fatalf("history.TaskDLQUnexpectedErrorAttempts after import: %+v, %v", es, err)
	}
	out, code = runBin(t, nil, "admin", "--addr", addr, "config", "import", bad)
	if code != 3 || !strings.Contains(out, "component.callbacks.retryPolicy.initialInterval[1] (line 6)") {
		t.Fatalf("bad file: exit %d (want 3)\n%s", code, out)
	}
	if es, err := p.Client().ConfigGet(ctx, dynconfig.KeyGroupLimiterConcurrency); err != nil || len(es) != 0 {
		t.Fatalf("a value of the refused file was applied: %+v, %v", es, err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	out, code = runBin(t, nil, "admin", "--addr", addr, "tasks", "submit", "--namespace", "ns-e2e", "--workflow", "wf-redirect",
		"--task-group", "callbacks.Invocation", "--destination", srv.URL+"/cb", "--request", `{"body":"aGk=","content_type":"text/plain"}`,
		"--schedule-to-close", "2")
	m := regexp.MustCompile(`task (\S+) on shard`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("tasks submit: exit %d\n%s", code, out)
	}
	testwait.ForErr(t, 20*time.Second, "the redirected task fails at its deadline", func() error {
		tk, err := p.Client().Task(ctx, m[1])
		if err != nil {
			return err
		}
		if tk.Status != "failed" || tk.LastAnswer == nil || !strings.HasPrefix(tk.LastAnswer.Message, queue.DeadlineExceeded) {
			return fmt.Errorf("task %s: %s %+v", m[1], tk.Status, tk.LastAnswer)
		}
		return nil
	})
}
