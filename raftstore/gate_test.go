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

// A server advertising an older log version holds back the newer command
// type: it is refused before proposing with upgrade_pending, SetConfig falls
// back to the legacy set_config, and no replica halts.
func TestVersionGateHoldsNewCommandsForAnOlderServer(t *testing.T) {
	n3Version := state.LogVersionBase
	c := startOlderN3(t, &n3Version)
	leader := c.leader(10 * time.Second)
	ctx := context.Background()
	testwait.For(t, 5*time.Second, "the cluster log version seen as the base", func() bool {
		v, err := leader.ClusterLogVersion()
		return err == nil && v.LogVersion == state.LogVersionBase
	})
	cmd, err := state.EncodeCommand(state.MsgSetConfigValue, state.SetConfigCommand{CommandMeta: state.CommandMeta{At: t0, Author: "t"}, Key: "k", Value: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = leader.Apply(ctx, cmd, "")
	// A newer leader waits for n3; n3 as leader does not know the type.
	want := state.CodeUpgradePending
	if leader.cfg.NodeID == "n3" {
		want = state.CodeInvalidArgument
	}
	var e *state.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("apply of set_config_value on leader %s = %v, want %s", leader.cfg.NodeID, err, want)
	}
	if _, err := leader.SetConfig(ctx, state.SetConfigCommand{CommandMeta: state.CommandMeta{Author: "t"}, Key: "k", Value: json.RawMessage(`{ "a": 1 }`)}); err != nil {
		t.Fatal(err)
	}
	for id, s := range c.nodes {
		testwait.For(t, 5*time.Second, id+" has the entry", func() bool {
			e, ok := s.Reader().ConfigEntry("k", "", "")
			return ok && string(e.Value) == `{"a":1}`
		})
		if s.HaltErr() != nil {
			t.Fatalf("%s halted: %v", id, s.HaltErr())
		}
	}

	// With n3 leading, a newer node still answers upgrade_pending itself
	// instead of forwarding a type n3's build cannot tell from garbage:
	// set_config_value, and import_tasks, which has no older fallback.
	if leader.cfg.NodeID != "n3" {
		if _, err := leader.TransferLeader(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 10*time.Second, "n3 leading", func() bool { return c.leader(10*time.Second).cfg.NodeID == "n3" })
	}
	imp, err := state.EncodeCommand(state.MsgImportTasks, state.ImportTasksCommand{CommandMeta: state.CommandMeta{At: t0}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n1", "n2"} {
		for _, cmd := range [][]byte{cmd, imp} {
			if _, err := c.nodes[id].Apply(ctx, cmd, ""); !errors.As(err, &e) || e.Code != state.CodeUpgradePending {
				t.Fatalf("%s proposing %s under n3 = %v, want upgrade_pending", id, state.MessageType(cmd[0]), err)
			}
		}
	}

	// A field newer than n3's build (an endpoint's health check) is
	// refused before proposing, naming the field; the endpoint without it
	// is written.
	ep := state.PutEndpointCommand{CommandMeta: state.CommandMeta{Author: "t"}, Name: "ep", URL: "http://127.0.0.1:1/nexus",
		Health: &state.EndpointHealth{URL: "http://127.0.0.1:1/health"}}
	if _, err := c.nodes["n1"].PutEndpoint(ctx, ep); !errors.As(err, &e) || e.Code != state.CodeUpgradePending || e.Field != "health" {
		t.Fatalf("an endpoint with a health check while n3 is behind: %v, want upgrade_pending naming health", err)
	}
	ep.Health = nil
	if _, err := c.nodes["n1"].PutEndpoint(ctx, ep); err != nil {
		t.Fatalf("the endpoint without a health check: %v", err)
	}
}
