package raftstore

import (
	"encoding/json"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/shardmap"
)

// BenchmarkFSMTaskLifecycle is one replica's apply cost per task, with no
// Raft around it: submits in entries of 500 tasks, then completions
// (succeeded) in entries of 64 results of one shard, applied through
// ApplyBatch 16 entries at a time as raft's batching FSM hands them over.
// Every replica of a cluster pays this for every task. json is the JSON
// types (submit_tasks, complete_tasks), binary their binary twins
// (log version 3), which the proposer sends once every server knows them.
func BenchmarkFSMTaskLifecycle(b *testing.B) {
	b.Run("json", func(b *testing.B) { benchmarkFSMTaskLifecycle(b, false) })
	b.Run("binary", func(b *testing.B) { benchmarkFSMTaskLifecycle(b, true) })
}

func benchmarkFSMTaskLifecycle(b *testing.B, bin bool) {
	const shards, submitBatch, completeBatch, applyBatch = 16, 500, 64, 16
	st, err := NewState(StateOptions{Validator: fakeValidator{}})
	if err != nil {
		b.Fatal(err)
	}
	f := NewFSM(st, nil)
	idx := uint64(0)
	var pending []*raft.Log
	flush := func() {
		if len(pending) == 0 {
			return
		}
		for i, r := range f.ApplyBatch(pending) {
			if res, ok := r.(*ApplyResult); ok && res.Err != nil {
				b.Fatalf("entry %d: %v", pending[i].Index, res.Err)
			}
		}
		pending = pending[:0]
	}
	add := func(typ MessageType, payload any) {
		var cmd []byte
		var err error
		switch c := payload.(type) {
		case SubmitTasksCommand:
			if bin {
				cmd, err = encodeSubmitTasksBin(&c)
			}
		case CompleteTasksCommand:
			if bin {
				cmd, err = encodeCompleteTasksBin(&c)
			}
		}
		if cmd == nil && err == nil {
			cmd, err = EncodeCommand(typ, payload)
		}
		if err != nil {
			b.Fatal(err)
		}
		idx++
		pending = append(pending, &raft.Log{Index: idx, Type: raft.LogCommand, Data: encodeEntry(cmd, "")})
		if len(pending) == applyBatch {
			flush()
		}
	}
	add(MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: shards})
	m, _, _ := shardmap.Rebalance(mustNewMapB(b, shards), []string{"a"}, nil)
	add(MsgCommitShardMap, CommitShardMapCommand{CommandMeta: meta0, Map: m})
	flush()
	epochs := make([]uint64, shards)
	for s := range shards {
		epochs[s] = st.ShardMap().Shards[s].Epoch
	}
	request := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"eyJvayI6dHJ1ZX0=","headers":{"content-type":"application/json"}}`)
	at := t0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	for done := 0; done < b.N; {
		n := min(submitBatch, b.N-done)
		tasks := make([]NewTask, n)
		byShard := make([][]TaskResult, shards)
		for i := range tasks {
			ns, wf := "ns", fmt.Sprintf("wf-%d", done+i)
			tasks[i] = NewTask{ID: NewTaskID(at), Shard: shardmap.ShardOf(ns, wf, shards), NamespaceID: ns, WorkflowID: wf,
				TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: request}
			byShard[tasks[i].Shard] = append(byShard[tasks[i].Shard], TaskResult{TaskID: tasks[i].ID, Status: TaskSucceeded, Attempts: 1, HTTPStatus: 200})
		}
		at = at.Add(time.Millisecond)
		add(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: CommandMeta{At: at}, Tasks: tasks})
		flush()
		for s, rs := range byShard {
			for len(rs) > 0 {
				k := min(completeBatch, len(rs))
				add(MsgCompleteTasks, CompleteTasksCommand{CommandMeta: CommandMeta{At: at}, Shard: s, Node: "a", Epoch: epochs[s], Results: rs[:k]})
				rs = rs[k:]
			}
		}
		flush()
		done += n
	}
}

// processCPU is this process's CPU time (user + system, every thread, the
// GC's included): on a machine shared with other work, CPU per task moves
// far less than wall time per task.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFSMTaskMemory is the heap one replica holds per retained task:
// b.N tasks submitted through the FSM in entries of 500 and left pending
// (rows, indexes, the pending counters), measured after a GC.
func BenchmarkFSMTaskMemory(b *testing.B) {
	const shards, submitBatch = 16, 500
	st, err := NewState(StateOptions{Validator: fakeValidator{}})
	if err != nil {
		b.Fatal(err)
	}
	f := NewFSM(st, nil)
	idx := uint64(0)
	apply := func(typ MessageType, payload any) {
		cmd, err := EncodeCommand(typ, payload)
		if err != nil {
			b.Fatal(err)
		}
		idx++
		if res, ok := f.ApplyBatch([]*raft.Log{{Index: idx, Type: raft.LogCommand, Data: encodeEntry(cmd, "")}})[0].(*ApplyResult); ok && res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	apply(MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: shards})
	request := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"eyJvayI6dHJ1ZX0=","headers":{"content-type":"application/json"}}`)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for done := 0; done < b.N; done += submitBatch {
		n := min(submitBatch, b.N-done)
		tasks := make([]NewTask, n)
		for i := range tasks {
			ns, wf := "ns", fmt.Sprintf("wf-%d", done+i)
			tasks[i] = NewTask{ID: NewTaskID(t0), Shard: shardmap.ShardOf(ns, wf, shards), NamespaceID: ns, WorkflowID: wf,
				TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: request}
		}
		apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: CommandMeta{At: t0}, Tasks: tasks})
	}
	b.ReportMetric(float64(heap()-before)/float64(b.N), "bytes/task")
	runtime.KeepAlive(f)
}
