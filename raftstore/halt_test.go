package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// A node downgraded past what its log holds (a build of the base log
// version started on a data dir the current build wrote set_config_value
// into) halts at that entry, and the halt fails its store: Failed is
// closed, FailErr is the halt, it is out of contact, and a wait for an
// index it will never apply ends at once. It used to stay up, in contact
// and owning its shards, with nothing more applied.
func TestHaltedNodeFails(t *testing.T) {
	n3Version := state.LogVersion
	c := startOlderN3(t, &n3Version)
	leader := c.leader(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := leader.SetConfig(ctx, state.SetConfigCommand{CommandMeta: state.CommandMeta{Author: "t"}, Key: "k", Value: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(res.Index, 10*time.Second)

	if leader == c.nodes["n3"] {
		if _, err := leader.TransferLeader(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	c.kill("n3")
	n3Version = state.LogVersionBase
	n3 := c.add("n3", 3)
	c.start("n3")
	testwait.For(t, 20*time.Second, "n3 halted and failed", func() bool { return n3.FailErr() != nil })
	select {
	case <-n3.Failed():
	default:
		t.Fatal("FailErr set but Failed not closed")
	}
	var he *state.HaltError
	if !errors.As(n3.FailErr(), &he) || he.Type != state.MsgSetConfigValue {
		t.Fatalf("FailErr = %v, want the halt at set_config_value", n3.FailErr())
	}
	if n3.InContact(0) {
		t.Fatal("a halted node is in contact: it would go on calling from a frozen state")
	}
	start := time.Now()
	if err := n3.WaitForApplied(ctx, he.Index); !errors.As(err, new(*state.HaltError)) {
		t.Fatalf("n3's wait for the halted index = %v, want the halt", err)
	}
	if err := n3.Sync(ctx); err == nil {
		t.Fatal("a halted node's read barrier succeeded")
	}
	t.Logf("halted at %d; the wait and the barrier ended after %v", he.Index, time.Since(start).Round(time.Millisecond))
}
