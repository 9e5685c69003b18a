package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport/transporttest"
)

// The outside tester's findings, against the real binary: a callback aimed
// at the node's own admin API (or its Raft or gossip port) is refused at
// submit, also through "localhost"; secrets submitted with a task reach the
// destination but are never read back, nor logged (at debug level).
func TestSecurityRealProcess(t *testing.T) {
	p := startSingle(t)
	cfg := p.Config()
	ctx := context.Background()
	for _, addr := range []string{cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr} {
		_, port, _ := net.SplitHostPort(addr)
		for _, url := range []string{"http://" + addr + "/v1/breakers/force", "http://localhost:" + port + "/v1/breakers/force"} {
			_, err := p.Client().SubmitTask(ctx, callbackTask("ns-sec", "wf-self", url, 1))
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "destination" {
				t.Fatalf("callback to %s: %v; want a 400 naming destination", url, err)
			}
		}
	}

	dest := transporttest.NewDestination(t)
	ts := callbackTask("ns-sec", "wf-secret", dest.CallbackURL()+"?sig=e2e-query-secret", 1)
	ts.Request.Header = map[string]string{"Authorization": "Bearer e2e-token-secret", "X-Api-Key": "e2e-key-secret"}
	acc, err := p.Client().SubmitTask(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, 30*time.Second, "the callback delivered", func() error {
		tk, err := p.Client().Task(ctx, acc.TaskID)
		if err != nil {
			return err
		}
		if tk.Status != state.TaskSucceeded {
			return errors.New("task " + tk.Status)
		}
		return nil
	})
	calls := dest.CallsWithRequestID(acc.TaskID)
	if len(calls) == 0 || calls[0].Header.Get("Authorization") != "Bearer e2e-token-secret" {
		t.Fatalf("the destination did not get the real Authorization: %+v", calls)
	}
	secrets := []string{"e2e-token-secret", "e2e-key-secret", "e2e-query-secret"}
	for _, path := range []string{"/v1/tasks/" + acc.TaskID, "/v1/tasks", "/v1/breakers?scope=cluster", "/metrics"} {
		resp, err := http.Get("http://" + cfg.HTTPAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				t.Errorf("GET %s shows %q", path, s)
			}
		}
	}
	logs, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "outbound attempt") {
		t.Fatalf("no outbound attempt in the debug log; the check below would prove nothing")
	}
	for _, s := range secrets {
		if strings.Contains(string(logs), s) {
			t.Errorf("the node's log shows %q", s)
		}
	}
}
