package state

import (
	"fmt"
	"testing"
	"time"

	"fusebox/shardmap"
)

// BenchmarkFSMTaskShards is one replica's apply per task with the shards a
// loaded node has: binary submits of 500 tasks spread over every shard, and
// completes as a node's group commit proposes them (complete_tasks_multi,
// shardsCompleteEntry results an entry, one section per shard), for the
// batch submitted shardsBacklog batches before, so that the due index holds
// a standing backlog as a delivering cluster's does. shards=16 and
// shards=256 run on two FSMs in alternating blocks of one batch; it reports
// each one's time in ApplyBatch per task (not the proposer's encoding) and
// 256 over 16. The due index is ordered by
// shard first: a batch's writes land in as many places as it has shards.
func BenchmarkFSMTaskShards(b *testing.B) {
	drivers := [2]*shardsDriver{newShardsDriver(b, 16), newShardsDriver(b, 256)}
	for _, d := range drivers { // the standing backlog, untimed
		for range shardsBacklog {
			d.step()
		}
	}
	for _, d := range drivers {
		d.applying = 0
	}
	b.ResetTimer()
	done := 0
	for ; done < b.N; done += lifecycleSubmitBatch {
		for _, d := range drivers {
			d.step()
		}
	}
	took := [2]time.Duration{drivers[0].applying, drivers[1].applying}
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(done), "shards16-ns/task")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(done), "shards256-ns/task")
	b.ReportMetric(float64(took[1])/float64(took[0]), "256/16")
}

const shardsBacklog, shardsCompleteEntry = 8, 128

// shardsDriver feeds one FSM BenchmarkFSMTaskShards' history.
type shardsDriver struct {
	b      *testing.B
	f      *FSM
	shards int
	idx    uint64
	epochs []uint64
	at     time.Time
	done   int
	queue  [][]NewTask // submitted batches not yet completed, oldest first
	// applying is the time spent in ApplyBatch.
	applying time.Duration
}

func newShardsDriver(b *testing.B, shards int) *shardsDriver {
	st, err := NewState(StateOptions{Validator: fakeValidator{}})
	if err != nil {
		b.Fatal(err)
	}
	d := &shardsDriver{b: b, f: NewFSM(st, nil), shards: shards, at: t0}
	m, _, _ := shardmap.Rebalance(mustNewMapB(b, shards), []string{"a"}, nil)
	d.apply(mustEncode(b, MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: shards}),
		mustEncode(b, MsgCommitShardMap, CommitShardMapCommand{CommandMeta: meta0, Map: m}))
	d.epochs = make([]uint64, shards)
	for s := range shards {
		d.epochs[s] = st.ShardMap().Shards[s].Epoch
	}
	return d
}

func mustEncode(b *testing.B, typ MessageType, payload any) []byte {
	cmd, err := EncodeCommand(typ, payload)
	if err != nil {
		b.Fatal(err)
	}
	return cmd
}

// step submits one batch and, past the backlog, completes the oldest.
func (d *shardsDriver) step() {
	tasks := make([]NewTask, lifecycleSubmitBatch)
	for i := range tasks {
		ns, wf := "ns", fmt.Sprintf("wf-%d", d.done+i)
		tasks[i] = NewTask{ID: NewTaskID(d.at), Shard: shardmap.ShardOf(ns, wf, d.shards), NamespaceID: ns, WorkflowID: wf,
			TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: lifecycleRequest}
	}
	d.done += len(tasks)
	d.at = d.at.Add(time.Millisecond)
	cmd, err := EncodeSubmitTasksBin(&SubmitTasksCommand{CommandMeta: CommandMeta{At: d.at}, Tasks: tasks})
	if err != nil {
		d.b.Fatal(err)
	}
	d.apply(cmd)
	d.queue = append(d.queue, tasks)
	if len(d.queue) <= shardsBacklog {
		return
	}
	old := d.queue[0]
	d.queue = d.queue[1:]
	var cmds [][]byte
	for start := 0; start < len(old); start += shardsCompleteEntry {
		byShard := map[int][]TaskResult{}
		for _, t := range old[start:min(start+shardsCompleteEntry, len(old))] {
			byShard[t.Shard] = append(byShard[t.Shard], TaskResult{TaskID: t.ID, Status: TaskSucceeded, Attempts: 1, HTTPStatus: 200})
		}
		var c CompleteTasksMultiCommand
		for s := range d.shards {
			if rs := byShard[s]; len(rs) > 0 {
				c.Sections = append(c.Sections, CompleteTasksCommand{CommandMeta: CommandMeta{At: d.at}, Shard: s, Node: "a", Epoch: d.epochs[s], Results: rs})
			}
		}
		cmd, err := EncodeCompleteTasksMulti(&c)
		if err != nil {
			d.b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	d.apply(cmds...)
}

// apply applies cmds as one batch, failing on any error result.
func (d *shardsDriver) apply(cmds ...[]byte) {
	entries := make([]Entry, len(cmds))
	for i, cmd := range cmds {
		d.idx++
		entries[i] = Entry{Index: d.idx, Command: true, Data: EncodeEntry(cmd, "")}
	}
	start := time.Now()
	out := d.f.ApplyBatch(entries)
	d.applying += time.Since(start)
	for i, r := range out {
		if r != nil && r.Err != nil {
			d.b.Fatalf("entry %d: %v", entries[i].Index, r.Err)
		}
	}
}
