package raftstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// logTypes counts the command types in s's raft log.
func logTypes(t *testing.T, s *Store) map[state.MessageType]int {
	t.Helper()
	first, err := s.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	out := map[state.MessageType]int{}
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		if _, typ, _, err := state.DecodeEntry(l.Data); err == nil {
			out[typ]++
		}
	}
	return out
}

// The task helpers propose the JSON types while a server is below
// LogVersionTasksBin and the binary ones once every server knows them; the replicas
// apply both alike and none halts.
func TestTaskCommandsFollowTheClusterLogVersion(t *testing.T) {
	n3Version := state.LogVersionTasksBin - 1
	c := startOlderN3(t, &n3Version)
	leader := c.leader(10 * time.Second)
	ctx := t.Context()
	if _, err := leader.SetShardCount(ctx, state.SetShardCountCommand{Count: taskShards}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := shardmap.Rebalance(mustNewMap(t, taskShards), []string{"n1"}, nil)
	idx, err := leader.CommitShardMap(ctx, state.CommitShardMapCommand{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(idx, 10*time.Second) // followers submit next: they need the shard count
	// round submits two tasks in one entry and one alone (group commit),
	// from every node, and completes them from the leader.
	round := func(name string) {
		t.Helper()
		for id, s := range c.nodes {
			out, _, err := s.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: []state.NewTask{
				newTaskFor("", "ns", name+id+"a", ""), newTaskFor("", "ns", name+id+"b", "rq-"+name+id)}})
			if err != nil {
				t.Fatalf("%s: submit on %s: %v", name, id, err)
			}
			one, _, err := s.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: []state.NewTask{newTaskFor("", "ns", name+id+"c", "")}})
			if err != nil {
				t.Fatalf("%s: single submit on %s: %v", name, id, err)
			}
			for _, o := range append(out, one...) {
				if o.Outcome != state.SubmitAccepted {
					t.Fatalf("%s: outcome %+v", name, o)
				}
				co, err := leader.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: o.Shard, Epoch: m.Shards[o.Shard].Epoch, Node: "n1",
					Results: []state.TaskResult{{TaskID: o.TaskID, Status: state.TaskPending, Attempts: 1, NextAttemptAt: time.Now().Add(time.Hour), Message: "retry"}}})
				if err != nil || co.Applied != 1 {
					t.Fatalf("%s: complete = %+v, %v", name, co, err)
				}
			}
		}
	}
	sameEverywhere := func() {
		t.Helper()
		idx := leader.fsm.AppliedIndex()
		c.waitAllApplied(idx, 10*time.Second)
		want := leader.Reader().ListTasks(state.TaskQuery{Limit: 1000})
		for id, s := range c.nodes {
			if s.HaltErr() != nil {
				t.Fatalf("%s halted: %v", id, s.HaltErr())
			}
			if d := cmp.Diff(want, s.Reader().ListTasks(state.TaskQuery{Limit: 1000})); d != "" {
				t.Fatalf("%s's tasks differ from the leader's:\n%s", id, d)
			}
		}
	}

	testwait.For(t, 5*time.Second, "the cluster log version seen as n3's", func() bool {
		v, err := leader.ClusterLogVersion()
		return err == nil && v.LogVersion == state.LogVersionTasksBin-1
	})
	round("old")
	sameEverywhere()
	if got := logTypes(t, leader); got[state.MsgSubmitTasksBin]+got[state.MsgCompleteTasksBin] != 0 || got[state.MsgSubmitTasks] == 0 || got[state.MsgCompleteTasks] == 0 {
		t.Fatalf("below LogVersionTasksBin the log holds %v", got)
	}

	// Upgrade n3 in place (same data dir), as a rolling upgrade does.
	n3Version = state.LogVersion
	c.kill("n3")
	c.add("n3", 3)
	c.start("n3")
	leader = c.leader(10 * time.Second)
	testwait.For(t, 10*time.Second, fmt.Sprintf("the cluster log version seen as %d", state.LogVersion), func() bool {
		v, err := leader.ClusterLogVersion()
		return err == nil && v.LogVersion == state.LogVersion
	})
	round("new")
	sameEverywhere()
	got := logTypes(t, leader)
	if got[state.MsgSubmitTasksBin] == 0 || got[state.MsgCompleteTasksBin] == 0 {
		t.Fatalf("at LogVersionTasksBin the log holds %v", got)
	}
	if n := len(leader.Reader().ListTasks(state.TaskQuery{Limit: 1000})); n != 18 {
		t.Fatalf("%d tasks, want 18", n)
	}
}
