package raftstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"fusebox/raftstore/state"
)

// TestImportConfigReplicates: an import proposed on a follower of a real
// three-node Raft group is one entry, applied identically everywhere.
func TestImportConfigReplicates(t *testing.T) {
	c := newTestCluster(t, nil)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.add(id, 3)
	}
	c.start("n1", "n2", "n3")
	c.leader(15 * time.Second)
	f := c.follower()
	ctx := context.Background()
	if _, err := f.SetConfig(ctx, state.SetConfigCommand{Key: "k", Namespace: "old", Value: json.RawMessage(`{"v":0}`)}); err != nil {
		t.Fatal(err)
	}
	out, idx, err := f.ImportConfig(ctx, state.ImportConfigCommand{Keys: []string{"k"}, Entries: []state.ConfigEntry{
		{Key: "k", Value: json.RawMessage(`{"v":1}`)}, {Key: "k", Namespace: "ns", Value: json.RawMessage(`{"v":2}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Set) != 2 || len(out.Deleted) != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	c.waitAllApplied(idx, 5*time.Second)
	for id, s := range c.nodes {
		es := s.Reader().Config()
		if len(es) != 2 || es[0].Index != idx || es[1].Index != idx {
			t.Fatalf("node %s: config %+v, want both values at index %d", id, es, idx)
		}
	}
	// Shape errors are refused before proposing.
	if _, _, err := f.ImportConfig(ctx, state.ImportConfigCommand{}); err == nil {
		t.Fatal("an empty import was accepted")
	}
}
