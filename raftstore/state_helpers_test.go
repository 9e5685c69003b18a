package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// Helpers shared with package state's tests (which have their own copies:
// test files do not cross packages).

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

var meta0 = state.CommandMeta{At: t0, Author: "alice"}

const taskShards = 4

// fakeValidator rejects the key "reject.me" and values that are not JSON
// objects, and canonicalizes by compacting.
type fakeValidator struct{}

func (fakeValidator) Validate(key, _, _ string, value json.RawMessage) (json.RawMessage, error) {
	if key == "reject.me" {
		return nil, &state.Error{Code: state.CodeInvalidArgument, Field: "key", Message: "rejected by validator"}
	}
	if !bytes.HasPrefix(bytes.TrimSpace(value), []byte("{")) {
		return nil, errors.New("value must be an object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, value); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func mustNewMap(t *testing.T, n int) *shardmap.Map {
	t.Helper()
	m, err := shardmap.New(n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newTaskFor(id, ns, wf, reqID string) state.NewTask {
	return state.NewTask{ID: id, Shard: shardmap.ShardOf(ns, wf, taskShards), NamespaceID: ns, WorkflowID: wf,
		TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", RequestID: reqID,
		Request: json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb"}`)}
}

type dump struct {
	Config     []state.ConfigEntry
	History    []state.HistoryEntry
	Endpoints  []state.Endpoint
	Forced     []state.ForcedBreaker
	ShardCount int
	ShardMap   *shardmap.Map
	Draining   []state.DrainingNode
	ClusterID  string
}

func dumpState(s *state.State) dump {
	return dump{s.Config(), s.ConfigHistory(0), s.Endpoints(), s.ForcedBreakers(), s.ShardCount(), s.ShardMap(), s.DrainingNodes(), s.ClusterID()}
}
