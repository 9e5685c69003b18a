package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fusebox/api"
)

// The shard commands parse their arguments, call a real in-process node and
// print tables (or JSON); refusals map to the documented exit codes.
func TestAdminShardsCommands(t *testing.T) {
	h := newAdminNode(t, 4)
	mustRun, wantExit := h.mustRun, h.wantExit
	apic, ctx := api.NewClient(h.n.HTTPAddr(), "", nil), h.ctx

	mustRun("shard map version", "shards", "list")
	var l api.ShardList
	if err := json.Unmarshal([]byte(mustRun(`"num_shards": 4`, "shards", "list", "--json")), &l); err != nil || len(l.Shards) != 4 || l.Shards[0].Owner != "n1" {
		t.Fatalf("list --json: %+v, %v", l, err)
	}
	mustRun("backlog         0", "shards", "describe", "2")
	wantExit(2, "non-negative integer", "shards", "describe", "x")
	wantExit(3, "not_found", "shards", "describe", "9")
	mustRun("shard 1 is on n1", "shards", "move", "1", "n1")
	wantExit(3, "ghost", "shards", "move", "1", "ghost")
	wantExit(3, "wrong_owner", "shards", "close", "1", "--epoch", "999")
	// The unfenced close must be asked for with --force; -1 is not "no epoch".
	wantExit(2, "--epoch N", "shards", "close", "1")
	wantExit(2, "--epoch -1: want a non-negative epoch", "shards", "close", "1", "--epoch", "-1")
	wantExit(2, "give one", "shards", "close", "1", "--epoch", "1", "--force")
	mustRun("shard 1 closed; now on n1", "shards", "close", "1", "--force")
	mustRun("shard 1 unpinned", "shards", "unpin", "1")
	mustRun("node n1 owns 4 shards; not draining", "nodes", "shards", "n1")

	// A lone node's shards can go nowhere: drained, they become unowned.
	out := mustRun("owns 0 shards; draining (operator)", "nodes", "drain", "n1", "--wait-timeout", "20s")
	if !strings.Contains(out, "left n1") || !strings.Contains(out, "n1 is drained") {
		t.Fatalf("drain printed no progress:\n%s", out)
	}
	mustRun("not draining", "nodes", "undrain", "n1")
	for {
		ns, err := apic.NodeShards(ctx, "n1")
		if err == nil && len(ns.Shards) == 4 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("undrained node did not get its shards back: %+v, %v", ns, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
