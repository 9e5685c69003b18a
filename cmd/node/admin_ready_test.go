package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitReadyOnAReadyNode(t *testing.T) {
	h := newAdminNode(t, 4)
	h.mustRun("ready", "wait-ready", "--timeout", "10s")
}

// runWaitReady runs `admin wait-ready` against addr.
func runWaitReady(t *testing.T, addr string, timeout string) (string, error) {
	t.Helper()
	root := rootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"admin", "--addr", addr, "wait-ready", "--timeout", timeout})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// A node that is not ready yet is followed, with its reason, until it is.
func TestWaitReadyFollowsTheReason(t *testing.T) {
	var polls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if polls.Add(1) < 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"ready":false,"detail":{"gossip_joined":true,"raft_leader":"","applied_index":0,"shards_ready":false,"shards":"waiting for the shard map"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"ready":true,"detail":{"gossip_joined":true,"raft_leader":"n1"}}`))
	}))
	t.Cleanup(srv.Close)
	out, err := runWaitReady(t, srv.URL, "20s")
	if err != nil {
		t.Fatalf("wait-ready: %v\n%s", err, out)
	}
	if strings.Count(out, "not ready:") != 1 {
		t.Errorf("want the reason printed once, when it first appeared:\n%s", out)
	}
	for _, want := range []string{"no raft leader known", "nothing applied yet", "shards: waiting for the shard map", "shards_ready=false", "ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Nothing listening: wait for it, then give up at --timeout with exit 4.
func TestWaitReadyTimesOutOnNoNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out, err := runWaitReady(t, addr, "1s")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 4 || !strings.Contains(ee.msg, "connection refused") {
		t.Fatalf("err %v, want exit 4 naming the refused connection\n%s", err, out)
	}
	if !strings.Contains(out, "waiting for the node to start") {
		t.Errorf("no progress line:\n%s", out)
	}
}

// The postgres task store's reason is shown by wait-ready.
func TestNotReadyReasonNamesTaskStoreError(t *testing.T) {
	got := notReadyReason(map[string]any{"raft_leader": "n1", "applied_index": float64(3), "task_store": "postgres",
		"task_store_error": "postgres task store not open: connection refused"})
	if got != "task_store_error: postgres task store not open: connection refused" {
		t.Fatalf("reason = %q", got)
	}
}
