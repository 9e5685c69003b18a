package state

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"fusebox/shardmap"
)

// BenchmarkFSMApplyEntry is one replica's apply cost per entry of
// BenchmarkRaftWrite (package raftstore), with no Raft around it: entries
// of one command each, every one with its own request id, handed to
// ApplyBatch 64 at a time as raft's batching FSM does with 64 writers.
// config is a set_config of a ~128-byte value (its config row, its history
// row and the trimming of the oldest past HistoryLimit); submit is a
// one-task binary submit. It runs far past RequestWindow, so every entry
// also forgets the request id RequestWindow entries old. Only ApplyBatch is
// timed (encoding is the proposer's).
func BenchmarkFSMApplyEntry(b *testing.B) {
	for _, mode := range []string{"config", "submit"} {
		b.Run(mode, func(b *testing.B) {
			st, err := NewState(StateOptions{Validator: fakeValidator{}})
			if err != nil {
				b.Fatal(err)
			}
			f := NewFSM(st, nil)
			idx := uint64(0)
			apply := func(logs []Entry) {
				for i, r := range f.ApplyBatch(logs) {
					if r != nil && r.Err != nil {
						b.Fatalf("entry %d: %v", logs[i].Index, r.Err)
					}
				}
			}
			entry := func(typ MessageType, payload any, id string) Entry {
				cmd, err := benchEncode(true, typ, payload)
				if err != nil {
					b.Fatal(err)
				}
				idx++
				return Entry{Index: idx, Command: true, Data: EncodeEntry(cmd, id)}
			}
			m, _, _ := shardmap.Rebalance(mustNewMapB(b, 16), []string{"a"}, nil)
			apply([]Entry{
				entry(MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: 16}, ""),
				entry(MsgCommitShardMap, CommitShardMapCommand{CommandMeta: meta0, Map: m}, ""),
			})
			rng := rand.New(rand.NewPCG(1, 2))
			value := json.RawMessage(`{"pad":"` + strings.Repeat("x", 100) + `"}`)
			req := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"` + strings.Repeat("x", 120) + `"}`)
			at := t0
			next := func(i int) Entry {
				id := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
				at = at.Add(time.Microsecond)
				if mode == "config" {
					return entry(MsgSetConfigValue, SetConfigCommand{CommandMeta: CommandMeta{At: at}, Key: fmt.Sprintf("w%d.k%d", i%64, i%16), Value: value}, id)
				}
				ns, wf := "ns", fmt.Sprintf("wf-%d", i)
				return entry(MsgSubmitTasksBin, SubmitTasksCommand{CommandMeta: CommandMeta{At: at}, Tasks: []NewTask{{ID: NewTaskID(at), Shard: shardmap.ShardOf(ns, wf, 16),
					NamespaceID: ns, WorkflowID: wf, TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: req}}}, id)
			}
			const batch = 64
			logs := make([]Entry, 0, batch)
			// Warm up past the request window and the history limit, so
			// every measured entry also trims.
			for i := range DefaultRequestWindow + batch {
				if logs = append(logs, next(i)); len(logs) == batch {
					apply(logs)
					logs = logs[:0]
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				b.StopTimer()
				logs = logs[:0]
				for i := range min(batch, b.N-done) {
					logs = append(logs, next(done+i))
				}
				b.StartTimer()
				apply(logs)
			}
		})
	}
}
