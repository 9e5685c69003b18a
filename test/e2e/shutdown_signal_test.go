package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

// A SIGHUP that arrives during a graceful shutdown is ignored: the node
// still finishes its hand-over and exits 0. The reloader stopped with the
// shutdown and left SIGHUP to its default action, so a reload (systemd's
// ExecReload, a certificate hook) during the drain killed the node.
func TestSIGHUPDuringShutdownIgnored(t *testing.T) {
	var arrived atomic.Int32
	answer := make(chan struct{})
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-answer:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(dest.Close)
	p := startSingle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := p.Client().SubmitTask(ctx, callbackTask("ns-hup", "wf-1", dest.URL+"/cb", 1)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the call to be under way", func() bool { return arrived.Load() == 1 })
	exited, err := p.signal(syscall.SIGTERM)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the node to log its shutdown", func() bool {
		b, _ := os.ReadFile(p.LogPath())
		return strings.Contains(string(b), "shutting down")
	})
	if _, err := p.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	close(answer) // the call ends: the drain can finish
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("no exit 60s after SIGTERM")
	}
	if err := p.ExitErr(); err != nil {
		t.Fatalf("exit after SIGTERM then SIGHUP: %v; want 0", err)
	}
}
