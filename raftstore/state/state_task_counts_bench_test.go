package state

import (
	"encoding/json"
	"fmt"
	"testing"

	"fusebox/shardmap"
)

// BenchmarkDestinationCounts: the status page's GET /v1/tasks/_counts over
// 100,000 pending tasks of 50 destinations, beside the listing of blocked
// tasks the page already makes every refresh (baseline: it walks the same
// rows in id order).
func BenchmarkDestinationCounts(b *testing.B) {
	const shards, total, dests, batch = 16, 100_000, 50, 500
	st, apply := benchFSM(b, false)
	apply(MsgSetShardCount, SetShardCountCommand{CommandMeta: meta0, Count: shards})
	request := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb"}`)
	for done := 0; done < total; done += batch {
		tasks := make([]NewTask, batch)
		for i := range tasks {
			ns, wf := "ns", fmt.Sprintf("wf-%d", done+i)
			dest := fmt.Sprintf("http://10.0.0.%d", (done+i)%dests)
			tasks[i] = NewTask{ID: NewTaskID(t0), Shard: shardmap.ShardOf(ns, wf, shards), NamespaceID: ns, WorkflowID: wf,
				TaskGroup: "callbacks.Invocation", Destination: dest + "/cb", DestinationKey: dest, Request: request}
		}
		apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: CommandMeta{At: t0}, Tasks: tasks})
	}
	b.Run("baseline_blocked_page", func(b *testing.B) {
		for b.Loop() {
			st.ListTasksPage(TaskQuery{Status: TaskStatusBlocked, Limit: 100})
		}
	})
	b.Run("counts", func(b *testing.B) {
		for b.Loop() {
			if got, _ := st.DestinationCounts(200_000); len(got) != dests {
				b.Fatalf("%d destinations, want %d", len(got), dests)
			}
		}
	})
}
