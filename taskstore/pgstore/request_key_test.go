package pgstore

import (
	"testing"

	"fusebox/raftstore/state"
)

// A submit's dedup id keys the tasks without a request_id of their own by
// their position, leaves a client's request_id and the caller's slice
// alone, and a read shows a derived id as none.
func TestKeyedByRequest(t *testing.T) {
	in := []state.NewTask{{ID: "a"}, {ID: "b", RequestID: "client-1"}, {ID: "c"}}
	if out := KeyedByRequest(in, ""); &out[0] != &in[0] {
		t.Fatal("no dedup id: the tasks must be passed as they are")
	}
	own := []state.NewTask{{ID: "b", RequestID: "client-1"}}
	if out := KeyedByRequest(own, "rid2:x"); &out[0] != &own[0] {
		t.Fatal("every task has its own request_id: the tasks must be passed as they are")
	}
	out := KeyedByRequest(in, "rid2:x")
	if in[0].RequestID != "" || in[2].RequestID != "" {
		t.Fatalf("the caller's tasks were changed: %+v", in)
	}
	if out[1].RequestID != "client-1" {
		t.Fatalf("a client's request_id became %q", out[1].RequestID)
	}
	if out[0].RequestID == out[2].RequestID || out[0].RequestID == "" {
		t.Fatalf("derived ids %q and %q must differ by position", out[0].RequestID, out[2].RequestID)
	}
	if again := KeyedByRequest(in, "rid2:x"); again[2].RequestID != out[2].RequestID {
		t.Fatalf("a retry derived %q, the first %q", again[2].RequestID, out[2].RequestID)
	}
	for _, tk := range out {
		if got, want := clientRequestID(tk.RequestID), map[string]string{"b": "client-1"}[tk.ID]; got != want {
			t.Errorf("task %s reads request_id %q, want %q", tk.ID, got, want)
		}
	}
}
