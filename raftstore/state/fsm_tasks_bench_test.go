package state

import (
	"encoding/json"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"fusebox/shardmap"
)

// BenchmarkFSMTaskLifecycle is one replica's apply cost per task, with no
// Raft around it: submits in entries of 500 tasks, then completions
// (succeeded) in entries of 64 results of one shard, applied through
// ApplyBatch 16 entries at a time as raft's batching FSM hands them over.
// Every replica of a cluster pays this for every task. json is the JSON
// types (submit_tasks, complete_tasks), binary their binary twins
// (LogVersionTasksBin), which the proposer sends once every server knows them.
// interleaved runs both on two FSMs in alternating blocks of 500 tasks and
// reports each one's ns per task and their ratio: on a machine shared with
// other work both then meet the same load, so the ratio holds still where
// separate runs swing (it understates the gain a little: the GC work the
// JSON blocks cause also lands in binary blocks).
func BenchmarkFSMTaskLifecycle(b *testing.B) {
	b.Run("json", func(b *testing.B) { benchmarkFSMTaskLifecycle(b, false) })
	b.Run("binary", func(b *testing.B) { benchmarkFSMTaskLifecycle(b, true) })
	b.Run("interleaved", func(b *testing.B) {
		drivers := [2]*lifecycleDriver{newLifecycleDriver(b, false), newLifecycleDriver(b, true)}
		var took [2]time.Duration
		b.ResetTimer()
		for done := 0; done < b.N; done += lifecycleSubmitBatch {
			n := min(lifecycleSubmitBatch, b.N-done)
			for i, d := range drivers {
				start := time.Now()
				d.step(n)
				took[i] += time.Since(start)
			}
		}
		b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "json-ns/task")
		b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "binary-ns/task")
		b.ReportMetric(float64(took[1])/float64(took[0]), "binary/json")
	})
}

func benchmarkFSMTaskLifecycle(b *testing.B, bin bool) {
	d := newLifecycleDriver(b, bin)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for done := 0; done < b.N; done += lifecycleSubmitBatch {
		d.step(min(lifecycleSubmitBatch, b.N-done))
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(d.applying.Nanoseconds())/float64(b.N), "apply-ns/op")
}

const (
	lifecycleShards, lifecycleSubmitBatch, lifecycleCompleteBatch, lifecycleApplyBatch = 16, 500, 64, 16
)

// lifecycleDriver feeds one FSM the benchmark's history in one encoding.
type lifecycleDriver struct {
	b       *testing.B
	bin     bool
	f       *FSM
	idx     uint64
	pending []Entry
	epochs  []uint64
	at      time.Time
	done    int
	// applying is the time spent in ApplyBatch: ns/op without the
	// proposer's side (building and encoding the commands).
	applying time.Duration
}

var lifecycleRequest = json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"eyJvayI6dHJ1ZX0=","headers":{"content-type":"application/json"}}`)

func newLifecycleDriver(b *testing.B, bin bool) *lifecycleDriver {
	st, err := NewState(StateOptions{Validator: fakeValidator{}})
	if err != nil {
		b.Fatal(err)
	}
	d := &lifecycleDriver{b: b, bin: bin, f: NewFSM(st, nil), at: t0}
	d.add(MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: lifecycleShards})
	m, _, _ := shardmap.Rebalance(mustNewMapB(b, lifecycleShards), []string{"a"}, nil)
	d.add(MsgCommitShardMap, CommitShardMapCommand{CommandMeta: meta0, Map: m})
	d.flush()
	d.epochs = make([]uint64, lifecycleShards)
	for s := range lifecycleShards {
		d.epochs[s] = st.ShardMap().Shards[s].Epoch
	}
	return d
}

// step submits n tasks in one entry and completes them (succeeded).
func (d *lifecycleDriver) step(n int) {
	tasks := make([]NewTask, n)
	byShard := make([][]TaskResult, lifecycleShards)
	for i := range tasks {
		ns, wf := "ns", fmt.Sprintf("wf-%d", d.done+i)
		tasks[i] = NewTask{ID: NewTaskID(d.at), Shard: shardmap.ShardOf(ns, wf, lifecycleShards), NamespaceID: ns, WorkflowID: wf,
			TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: lifecycleRequest}
		byShard[tasks[i].Shard] = append(byShard[tasks[i].Shard], TaskResult{TaskID: tasks[i].ID, Status: TaskSucceeded, Attempts: 1, HTTPStatus: 200})
	}
	d.at = d.at.Add(time.Millisecond)
	d.add(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: CommandMeta{At: d.at}, Tasks: tasks})
	d.flush()
	for s, rs := range byShard {
		for len(rs) > 0 {
			k := min(lifecycleCompleteBatch, len(rs))
			d.add(MsgCompleteTasks, CompleteTasksCommand{CommandMeta: CommandMeta{At: d.at}, Shard: s, Node: "a", Epoch: d.epochs[s], Results: rs[:k]})
			rs = rs[k:]
		}
	}
	d.flush()
	d.done += n
}

// add encodes a command (submits and completes in the driver's encoding)
// and queues its entry, applying a full batch.
func (d *lifecycleDriver) add(typ MessageType, payload any) {
	cmd, err := benchEncode(d.bin, typ, payload)
	if err != nil {
		d.b.Fatal(err)
	}
	d.idx++
	d.pending = append(d.pending, Entry{Index: d.idx, Command: true, Data: EncodeEntry(cmd, "")})
	if len(d.pending) == lifecycleApplyBatch {
		d.flush()
	}
}

// benchEncode encodes a command; with bin, submits and completes in their
// binary types.
func benchEncode(bin bool, typ MessageType, payload any) ([]byte, error) {
	switch c := payload.(type) {
	case SubmitTasksCommand:
		if bin {
			return EncodeSubmitTasksBin(&c)
		}
	case CompleteTasksCommand:
		if bin {
			return EncodeCompleteTasksBin(&c)
		}
	}
	return EncodeCommand(typ, payload)
}

func (d *lifecycleDriver) flush() {
	if len(d.pending) == 0 {
		return
	}
	start := time.Now()
	out := d.f.ApplyBatch(d.pending)
	d.applying += time.Since(start)
	for i, r := range out {
		if r != nil && r.Err != nil {
			d.b.Fatalf("entry %d: %v", d.pending[i].Index, r.Err)
		}
	}
	d.pending = d.pending[:0]
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
// (rows, indexes, the pending counters), measured after a GC; submitted as
// JSON entries and as binary ones.
func BenchmarkFSMTaskMemory(b *testing.B) {
	b.Run("json", func(b *testing.B) { benchmarkFSMTaskMemory(b, false) })
	b.Run("binary", func(b *testing.B) { benchmarkFSMTaskMemory(b, true) })
}

func benchmarkFSMTaskMemory(b *testing.B, bin bool) {
	const shards, submitBatch = 16, 500
	st, apply := benchFSM(b, bin)
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
	runtime.KeepAlive(st)
}

func mustNewMapB(b *testing.B, n int) *shardmap.Map {
	m, err := shardmap.New(n)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchFSM is a fresh state and FSM for a benchmark, and apply, which
// applies one command (binary when bin, where the type has a binary form)
// as the next entry and fails b on an error result.
func benchFSM(b *testing.B, bin bool) (*State, func(MessageType, any)) {
	b.Helper()
	st, err := NewState(StateOptions{Validator: fakeValidator{}})
	if err != nil {
		b.Fatal(err)
	}
	f := NewFSM(st, nil)
	idx := uint64(0)
	return st, func(typ MessageType, payload any) {
		cmd, err := benchEncode(bin, typ, payload)
		if err != nil {
			b.Fatal(err)
		}
		idx++
		if res := f.ApplyBatch([]Entry{{Index: idx, Command: true, Data: EncodeEntry(cmd, "")}})[0]; res != nil && res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}
