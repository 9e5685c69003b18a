package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/node"
	"fusebox/transport"
)

// The shard commands parse their arguments, call a real in-process node and
// print tables (or JSON); refusals map to the documented exit codes.
func TestAdminShardsCommands(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	n, err := node.New(node.Config{NodeID: "n1", DataDir: filepath.Join(dir, "n1"), HTTPAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Shards: 4, Timing: "fast", Version: "test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer n.Close(context.Background())
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api := transport.NewClient(n.HTTPAddr(), "", nil)
	for api.Do(ctx, "GET", "/readyz", nil, nil, nil) != nil {
		if ctx.Err() != nil {
			t.Fatal("node not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}

	run := func(args ...string) (string, error) {
		t.Helper()
		root := rootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"admin", "--addr", n.HTTPAddr()}, args...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	mustRun := func(want string, args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("%v: %v\n%s\nwant %q in the output", args, err, out, want)
		}
		return out
	}
	wantExit := func(code int, want string, args ...string) {
		t.Helper()
		out, err := run(args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != code || !strings.Contains(ee.msg+out, want) {
			t.Fatalf("%v: err %v (%s); want exit %d mentioning %q", args, err, out, code, want)
		}
	}

	mustRun("shard map version", "shards", "list")
	var l transport.ShardList
	if err := json.Unmarshal([]byte(mustRun(`"num_shards": 4`, "shards", "list", "--json")), &l); err != nil || len(l.Shards) != 4 || l.Shards[0].Owner != "n1" {
		t.Fatalf("list --json: %+v, %v", l, err)
	}
	mustRun("backlog         0", "shards", "describe", "2")
	wantExit(2, "non-negative integer", "shards", "describe", "x")
	wantExit(3, "not_found", "shards", "describe", "9")
	mustRun("shard 1 is on n1", "shards", "move", "1", "n1")
	wantExit(3, "ghost", "shards", "move", "1", "ghost")
	wantExit(3, "wrong_owner", "shards", "close", "1", "--epoch", "999")
	mustRun("shard 1 closed; now on n1", "shards", "close", "1")
	mustRun("shard 1 unpinned", "shards", "unpin", "1")
	mustRun("node n1 owns 4 shards; not draining", "nodes", "shards", "n1")

	// A lone node's shards can go nowhere: drained, they become unowned.
	out := mustRun("owns 0 shards; draining (operator)", "nodes", "drain", "n1", "--wait-timeout", "20s")
	if !strings.Contains(out, "left n1") || !strings.Contains(out, "n1 is drained") {
		t.Fatalf("drain printed no progress:\n%s", out)
	}
	mustRun("not draining", "nodes", "undrain", "n1")
	for {
		ns, err := api.NodeShards(ctx, "n1")
		if err == nil && len(ns.Shards) == 4 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("undrained node did not get its shards back: %+v, %v", ns, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
