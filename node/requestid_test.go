package node

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fusebox/api"
)

// X-Request-Id makes a caller's retried write apply once, and only its
// own: two tokens that send the same id each get their own write. Before
// ids were scoped by the caller, the second tenant's submit answered 202
// with the first tenant's task id, and its own task was never stored.
func TestRequestIDScopedByCaller(t *testing.T) {
	tokens := map[string]string{
		"tenant-a": "tenant-a-0123456789abcdef0123456789abcdef",
		"tenant-b": "tenant-b-0123456789abcdef0123456789abcdef",
	}
	file := filepath.Join(t.TempDir(), "tokens")
	body := "tenant-a submit " + tokens["tenant-a"] + "\ntenant-b submit " + tokens["tenant-b"] + "\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.AdminTokenFile = file })
	n := c.nodes[0]
	hc := &http.Client{Timeout: 20 * time.Second}
	submit := func(who, wf string) api.TaskAccepted {
		t.Helper()
		b, _ := json.Marshal(callbackTask("http://127.0.0.1:9/cb", wf, ""))
		req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/v1/tasks", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokens[who])
		req.Header.Set("X-Request-Id", "batch-1")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out api.TaskAccepted
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s submit: HTTP %d, %v", who, resp.StatusCode, err)
		}
		return out
	}
	a := submit("tenant-a", "wf-a")
	b := submit("tenant-b", "wf-b")
	if b.TaskID == a.TaskID {
		t.Fatalf("tenant-b's submit with tenant-a's X-Request-Id answered tenant-a's task %s", a.TaskID)
	}
	for who, acc := range map[string]api.TaskAccepted{"tenant-a": a, "tenant-b": b} {
		tk, ok := n.store.Reader().Task(acc.TaskID)
		if !ok {
			t.Fatalf("%s's task %s is not stored", who, acc.TaskID)
		}
		if want := "wf-" + who[len(who)-1:]; tk.WorkflowID != want {
			t.Errorf("%s's task %s has workflow %q, want %q", who, acc.TaskID, tk.WorkflowID, want)
		}
	}
	if again := submit("tenant-a", "wf-a"); again.TaskID != a.TaskID {
		t.Errorf("tenant-a's retry with its X-Request-Id made task %s, want its first %s", again.TaskID, a.TaskID)
	}
}
