package state

import (
	"bytes"
	"testing"
)

// A snapshot stream arrives from the leader (InstallSnapshot) and from
// disk. Whatever its bytes, Restore must not panic; a stream it accepts
// must snapshot back to a canonical stream that restores to the same bytes.
func FuzzRestoreSnapshot(f *testing.F) {
	header := `{"format":"fusebox-raftstore","version":1,"applied":7}` + "\n"
	task := func(id, status, req string) string {
		return `{"t":"tasks","r":{"id":"` + id + `","shard":1,"namespace_id":"ns","workflow_id":"w","task_group":"callbacks.Invocation",` +
			`"destination":"http://127.0.0.1:1/cb","request_id":"` + req + `","request":{"url":"http://127.0.0.1:1/cb"},"status":"` + status +
			`","attempts":1,"next_attempt_at":"2026-01-01T00:00:00Z","created_at":"2026-01-01T00:00:00Z","completed_at":"2026-01-01T00:00:01Z","index":3}}` + "\n"
	}
	f.Add([]byte(header))
	f.Add([]byte(header + `{"t":"counters","r":{"name":"tasks_pending/1","value":1}}` + "\n" +
		task("b", TaskPending, "r1") + task("a", TaskSucceeded, "") + task("c", TaskDLQ, "r2") + task("d", TaskFailed, "")))
	f.Add([]byte(header + task("a", TaskPending, "r1") + task("a", TaskPending, "")))   // duplicate id
	f.Add([]byte(header + task("a", TaskPending, "r1") + task("b", TaskPending, "r1"))) // duplicate request id
	f.Add([]byte(header + `{"t":"tasks","r":{"id":""}}` + "\n"))
	f.Add([]byte(`{"format":"other","version":1}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		first := newTestFSM(t, StateOptions{})
		if err := first.Restore(bytes.NewReader(data)); err != nil {
			return
		}
		canon := snapshotBytes(t, first)
		second := newTestFSM(t, StateOptions{})
		if err := second.Restore(bytes.NewReader(canon)); err != nil {
			t.Fatalf("a snapshot of an accepted stream is refused: %v", err)
		}
		if again := snapshotBytes(t, second); !bytes.Equal(again, canon) {
			t.Fatalf("canonical snapshot does not round-trip:\n%s\nvs\n%s", canon, again)
		}
		// The indexes agree with the rows.
		st := second.State()
		for _, tk := range st.ListTasks(TaskQuery{Limit: 1 << 20}) {
			if tk.RequestID != "" {
				if got, ok := st.TaskByRequestID(tk.NamespaceID, tk.RequestID); !ok || got.ID != tk.ID {
					t.Fatalf("request index lost task %q", tk.ID)
				}
			}
		}
	})
}
