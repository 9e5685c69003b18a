package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// newTaskStore is a started one-node store whose shard count (taskShards)
// and map (every shard on n1) are committed.
func newTaskStore(t *testing.T) (*Store, *shardmap.Map) {
	t.Helper()
	c := newTestCluster(t, nil)
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	ctx := t.Context()
	if _, err := s.SetShardCount(ctx, state.SetShardCountCommand{Count: taskShards}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := shardmap.Rebalance(mustNewMap(t, taskShards), []string{"n1"}, nil)
	if _, err := s.CommitShardMap(ctx, state.CommitShardMapCommand{Map: m}); err != nil {
		t.Fatal(err)
	}
	return s, m
}

// The store helper maps a refusal to *shardmap.WrongOwnerError and assigns
// ids and shards; exercised end to end on a one-node store.
func TestStoreTaskHelpers(t *testing.T) {
	s, m := newTaskStore(t)
	ctx := t.Context()
	nt := newTaskFor("", "ns", "wf", "rq")
	nt.Shard = -5 // the helper assigns it
	out, idx, err := s.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: []state.NewTask{nt}})
	if err != nil || len(out) != 1 || out[0].Outcome != state.SubmitAccepted || out[0].Shard != shardmap.ShardOf("ns", "wf", taskShards) || len(out[0].TaskID) != 32 {
		t.Fatalf("submit = %+v, %v", out, err)
	}
	if err := s.WaitForApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	shard, epoch := out[0].Shard, m.Shards[out[0].Shard].Epoch
	_, err = s.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: shard, Epoch: epoch + 7, Node: "n1",
		Results: []state.TaskResult{{TaskID: out[0].TaskID, Status: state.TaskSucceeded}}})
	var woe *shardmap.WrongOwnerError
	if !errors.As(err, &woe) || woe.Owner != "n1" || woe.Epoch != epoch || woe.Shard != shard {
		t.Fatalf("stale complete error = %v", err)
	}
	co, err := s.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: shard, Epoch: epoch, Node: "n1",
		Results: []state.TaskResult{{TaskID: out[0].TaskID, Status: state.TaskSucceeded, Attempts: 1}}})
	if err != nil || co.Applied != 1 {
		t.Fatalf("complete = %+v, %v", co, err)
	}
	if _, err := s.CompleteTasks(ctx, state.CompleteTasksCommand{Shard: shard, Node: "n1", Results: []state.TaskResult{{TaskID: "x", Status: "bogus"}}}); !errors.Is(err, state.ErrInvalidArgument) {
		t.Fatalf("bad status error = %v", err)
	}
	// The collector, run as the leader would, deletes it once retention
	// has passed (retention 1ns: everything completed is expired).
	collectCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunTaskCollector(collectCtx, 20*time.Millisecond, func() time.Duration { return time.Nanosecond })
	}()
	testwait.For(t, 10*time.Second, "the collector to delete the completed task", func() bool {
		_, ok := s.Reader().Task(out[0].TaskID)
		return !ok
	})
	stop()
	<-done
}
