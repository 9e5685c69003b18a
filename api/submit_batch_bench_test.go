package api

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkDecodeSubmitBatch is a batch of 500 callback submits (about
// 140 KB) decoded as the batch route does (sized: into a slice of
// batchSizeHint) and into an empty value (unsized); per batch.
func BenchmarkDecodeSubmitBatch(b *testing.B) {
	in := TaskBatchSubmit{}
	for i := range 500 {
		id := fmt.Sprintf("r-%d", i)
		in.Tasks = append(in.Tasks, TaskSubmit{NamespaceID: "ns-bench", WorkflowID: "wf-" + id, TaskGroup: "callbacks.Invocation",
			Destination: "http://127.0.0.1:9/cb", Request: TaskRequest{NexusRequestID: id, Body: []byte(`{"result":"` + id + `"}`), ContentType: "application/json"}})
	}
	raw, err := json.Marshal(in)
	if err != nil {
		b.Fatal(err)
	}
	for _, sized := range []bool{true, false} {
		b.Run(map[bool]string{true: "sized", false: "unsized"}[sized], func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var v TaskBatchSubmit
				if sized {
					v.Tasks = make([]TaskSubmit, 0, batchSizeHint(raw))
				}
				if err := decodeStrict(raw, &v); err != nil || len(v.Tasks) != 500 {
					b.Fatal(err, len(v.Tasks))
				}
			}
		})
	}
}
