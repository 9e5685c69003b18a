package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// batchLogs builds a log sequence with config writes, a duplicate request id,
// a raft configuration entry and, at failAt, a command the FSM refuses.
func batchLogs(t *testing.T, n, failAt int) []Entry {
	t.Helper()
	var logs []Entry
	for i := 1; i <= n; i++ {
		var cmd []byte
		var err error
		reqID := fmt.Sprintf("req-%d", i)
		switch {
		case i == failAt:
			cmd, err = EncodeCommand(MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: "bad name!", URL: "http://127.0.0.1:1/"})
		case i%7 == 0:
			logs = append(logs, Entry{Index: uint64(i)})
			continue
		case i%5 == 0:
			reqID = "req-1" // a retry of the first command: applies once
			cmd, err = EncodeCommand(MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: "k1", Value: json.RawMessage(`{"v":1}`)})
		default:
			cmd, err = EncodeCommand(MsgSetConfig, SetConfigCommand{CommandMeta: meta0, Key: fmt.Sprintf("k%d", i), Value: json.RawMessage(fmt.Sprintf(`{"v":%d}`, i))})
		}
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, Entry{Index: uint64(i), Command: true, Data: EncodeEntry(cmd, reqID)})
	}
	return logs
}

// Applying a log in batches of any size gives byte-identical state and the
// same results as applying it one entry at a time, failed commands included
// (their writes are dropped, their dedup record kept).
func TestApplyBatchMatchesSingleApply(t *testing.T) {
	for _, failAt := range []int{0, 3, 20} {
		logs := batchLogs(t, 40, failAt)
		single := newTestFSM(t, StateOptions{})
		var want []*ApplyResult
		for _, l := range logs {
			if !l.Command {
				want = append(want, nil)
				continue
			}
			want = append(want, single.Apply(l.Index, l.Data))
		}
		wantSnap := snapshotBytes(t, single)
		for _, size := range []int{1, 2, 7, 64} {
			t.Run(fmt.Sprintf("fail=%d/batch=%d", failAt, size), func(t *testing.T) {
				f := newTestFSM(t, StateOptions{})
				var got []*ApplyResult
				for i := 0; i < len(logs); i += size {
					got = append(got, f.ApplyBatch(logs[i:min(i+size, len(logs))])...)
				}
				if f.AppliedIndex() != uint64(len(logs)) {
					t.Fatalf("applied index %d, want %d", f.AppliedIndex(), len(logs))
				}
				for i := range want {
					w, _ := json.Marshal(want[i])
					g, _ := json.Marshal(got[i])
					if !bytes.Equal(w, g) {
						t.Fatalf("entry %d: result %s, want %s", i+1, g, w)
					}
				}
				if !bytes.Equal(snapshotBytes(t, f), wantSnap) {
					t.Fatal("state after batched apply differs from one-by-one apply")
				}
				if failAt > 0 {
					if _, ok := f.State().Endpoint("bad name!"); ok {
						t.Fatal("a refused command's write survived")
					}
				}
			})
		}
	}
}
