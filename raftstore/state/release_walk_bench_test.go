package state

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"fusebox/shardmap"
)

// BenchmarkReleaseWalk is the store side of one breaker close on a node
// that owns every shard: the queue's release walk reads each shard's
// blocked tasks of the closed key (here it has none there, as in the
// review that measured it) beside 100,000 pending tasks of another tenant
// over 16 shards. walk=whole_shard is the read before the thirty-seventh
// session (from the shard's first row, unbounded: ScanPending with the
// blocked match, what ScanBlocked was); walk=from_close_paged is the read
// now (from the close, MaxBlockedScan rows a call, resumed until done).
// backlog=due: the other tenant's tasks are due (a backlog being worked
// through); backlog=later: they are due after the close (retries, or a
// dead key's refused tasks in their turns), which starting at the close
// does not skip. ns/op is the CPU of one close; reads/op its reads (calls);
// ns/read their mean time, what a shard's mutex is held for per read (the
// longest read is not reported: on a shared machine it is a preemption's).
func BenchmarkReleaseWalk(b *testing.B) {
	const shards, batch, total = 16, 500, 100_000
	st, apply := benchFSM(b, true)
	apply(MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: shards})
	request := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"eyJvayI6dHJ1ZX0=","headers":{"content-type":"application/json"}}`)
	for done := 0; done < total; done += batch {
		at := t0.Add(time.Duration(done) * time.Millisecond) // due over 100 s
		tasks := make([]NewTask, batch)
		for i := range tasks {
			ns, wf := "tenant-x", fmt.Sprintf("wf-%d", done+i)
			tasks[i] = NewTask{ID: NewTaskID(at), Shard: shardmap.ShardOf(ns, wf, shards), NamespaceID: ns, WorkflowID: wf,
				TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: request}
		}
		apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: CommandMeta{At: at}, Tasks: tasks})
	}
	closedKey := func(t *Task) bool { return t.NamespaceID == "tenant-z" }
	for _, bl := range []struct {
		name  string
		close time.Time
	}{{"due", t0.Add(time.Hour)}, {"later", t0.Add(-time.Second)}} {
		b.Run("backlog="+bl.name+"/walk=whole_shard", func(b *testing.B) {
			reads := 0
			for b.Loop() {
				for sh := range shards {
					reads++
					if _, done := st.ScanPending(sh, time.Time{}, "", time.Time{}, 1000,
						func(t *Task) bool { return t.IsBlocked() && closedKey(t) }, nil); !done {
						b.Fatal("the walk stopped early")
					}
				}
			}
			reportReads(b, reads)
		})
		b.Run("backlog="+bl.name+"/walk=from_close_paged", func(b *testing.B) {
			reads := 0
			for b.Loop() {
				for sh := range shards {
					at, id := bl.close, ""
					for n := 0; ; n++ {
						if n > total {
							b.Fatal("the walk does not end")
						}
						reads++
						_, nextAt, nextID, done := st.ScanBlocked(sh, at, id, 1000, closedKey, nil)
						if done {
							break
						}
						at, id = nextAt, nextID
					}
				}
			}
			reportReads(b, reads)
		})
	}
}

// reportReads reports reads/op and the mean ns/read of a b.Loop benchmark.
func reportReads(b *testing.B, reads int) {
	b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reads), "ns/read")
}
