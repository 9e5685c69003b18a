package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// multiHistory splits taskCommandsForEncodings into its submits and its
// completes grouped into sections of 1..5 (with the same shard twice in a
// group from 5 on, taskShards being 4); the completes the FSM refuses with
// an error (not a fence refusal) are groups of their own.
func multiHistory() (submits []SubmitTasksCommand, groups [][]CompleteTasksCommand) {
	var completes []CompleteTasksCommand
	for _, c := range taskCommandsForEncodings() {
		switch c := c.(type) {
		case SubmitTasksCommand:
			submits = append(submits, c)
		case CompleteTasksCommand:
			completes = append(completes, c)
		}
	}
	errs := completes[len(completes)-2:] // a shard outside the map, an invalid result
	completes = completes[:len(completes)-2]
	for n := 1; len(completes) > 0; n = n%5 + 1 {
		k := min(n, len(completes))
		groups = append(groups, completes[:k])
		completes = completes[k:]
	}
	for _, c := range errs {
		groups = append(groups, []CompleteTasksCommand{c})
	}
	return submits, groups
}

// The same results as complete_tasks_multi entries and as one
// complete_tasks_bin entry per section leave byte-identical state, and each
// section's outcome is the one its entry alone gives. Rows are stamped with
// their entry's raft index, so the single entries of a group are applied at
// the index of the group's multi entry.
func TestCompleteMultiMatchesSingleEntries(t *testing.T) {
	submits, groups := multiHistory()
	snaps := map[bool][]byte{}
	outcomes := map[bool][]string{}
	for _, multi := range []bool{false, true} {
		x := newTaskFSM(t)
		for i := range submits {
			cmd, err := EncodeSubmitTasksBin(&submits[i])
			if err != nil {
				t.Fatal(err)
			}
			x.idx++
			x.f.Apply(x.idx, EncodeEntry(cmd, ""))
		}
		for _, g := range groups {
			x.idx++
			if multi {
				cmd, err := EncodeCompleteTasksMulti(&CompleteTasksMultiCommand{Sections: g})
				if err != nil {
					t.Fatal(err)
				}
				res := x.f.Apply(x.idx, EncodeEntry(cmd, ""))
				if res.Err != nil {
					outcomes[multi] = append(outcomes[multi], "error "+string(res.Err.Code))
					continue
				}
				var outs []CompleteOutcome
				if err := json.Unmarshal(res.Value, &outs); err != nil || len(outs) != len(g) {
					t.Fatalf("multi value %s: %v", res.Value, err)
				}
				for _, o := range outs {
					b, _ := json.Marshal(o)
					outcomes[multi] = append(outcomes[multi], string(b))
				}
				continue
			}
			for j := range g {
				cmd, err := EncodeCompleteTasksBin(&g[j])
				if err != nil {
					t.Fatal(err)
				}
				res := x.f.Apply(x.idx, EncodeEntry(cmd, ""))
				if res.Err != nil {
					outcomes[multi] = append(outcomes[multi], "error "+string(res.Err.Code))
					continue
				}
				outcomes[multi] = append(outcomes[multi], string(res.Value))
			}
		}
		snaps[multi] = snapshotBytes(t, x.f)
	}
	if d := cmp.Diff(outcomes[false], outcomes[true]); d != "" {
		t.Fatalf("outcomes differ (-single +multi):\n%s", d)
	}
	if !bytes.Equal(snaps[false], snaps[true]) {
		t.Fatalf("snapshots differ:\n%s", cmp.Diff(string(snaps[false]), string(snaps[true])))
	}
	all := fmt.Sprint(outcomes[true])
	for _, want := range []string{`"refused":{`, `"applied":`, "error invalid_argument"} {
		if !bytes.Contains([]byte(all), []byte(want)) {
			t.Errorf("no outcome has %s", want)
		}
	}
	for _, want := range []string{`"status":"dlq"`, `"attempt_epoch":1`, `"output":{"op":"x"}`} {
		if !bytes.Contains(snaps[true], []byte(want)) {
			t.Errorf("snapshot has no %s", want)
		}
	}
}

// A section under a stale epoch is refused alone, with the current owner;
// the other sections of the entry apply.
func TestCompleteMultiFencesEachSection(t *testing.T) {
	x := newTaskFSM(t)
	var ids [2]string
	var shards [2]int
	for i, wf := range []string{"wf-a", "wf-b"} {
		nt := newTaskFor(fmt.Sprintf("t%d", i), "ns", wf, "")
		mustOK(t, x.apply(MsgSubmitTasks, SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{nt}}, ""))
		ids[i], shards[i] = nt.ID, nt.Shard
	}
	owner := func(s int) string { return x.m.Shards[s].Owner }
	epoch := func(s int) uint64 { return x.m.Shards[s].Epoch }
	c := CompleteTasksMultiCommand{Sections: []CompleteTasksCommand{
		{CommandMeta: meta0, Shard: shards[0], Epoch: epoch(shards[0]) + 5, Node: owner(shards[0]), Results: []TaskResult{{TaskID: ids[0], Status: TaskSucceeded, Attempts: 1}}},
		{CommandMeta: meta0, Shard: shards[1], Epoch: epoch(shards[1]), Node: owner(shards[1]), Results: []TaskResult{{TaskID: ids[1], Status: TaskSucceeded, Attempts: 1}}},
	}}
	cmd, err := EncodeCompleteTasksMulti(&c)
	if err != nil {
		t.Fatal(err)
	}
	x.idx++
	res := x.f.Apply(x.idx, EncodeEntry(cmd, "multi-1"))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var outs []CompleteOutcome
	if err := json.Unmarshal(res.Value, &outs); err != nil {
		t.Fatal(err)
	}
	want := []CompleteOutcome{
		{Refused: &RefusedShard{Shard: shards[0], Owner: owner(shards[0]), Epoch: epoch(shards[0])}},
		{Applied: 1},
	}
	if d := cmp.Diff(want, outs); d != "" {
		t.Fatalf("outcomes (-want +got):\n%s", d)
	}
	if got, _ := x.st.Task(ids[0]); got.Status != TaskPending {
		t.Fatalf("the refused section's task is %s", got.Status)
	}
	if got, _ := x.st.Task(ids[1]); got.Status != TaskSucceeded {
		t.Fatalf("the applied section's task is %s", got.Status)
	}
}

func TestCompleteMultiValidate(t *testing.T) {
	ok := CompleteTasksCommand{CommandMeta: meta0, Shard: 1, Epoch: 1, Node: "a"}
	bad := ok
	bad.Results = []TaskResult{{TaskID: "x", Status: "done"}}
	for name, tc := range map[string]struct {
		c     CompleteTasksMultiCommand
		field string
	}{
		"empty":          {CompleteTasksMultiCommand{}, "sections"},
		"too many":       {CompleteTasksMultiCommand{Sections: make([]CompleteTasksCommand, MaxCompleteSections+1)}, "sections"},
		"a bad section":  {CompleteTasksMultiCommand{Sections: []CompleteTasksCommand{ok, bad}}, "sections[1].results[0].status"},
		"a section node": {CompleteTasksMultiCommand{Sections: []CompleteTasksCommand{{CommandMeta: meta0}}}, "sections[0].node"},
	} {
		err := tc.c.Validate()
		if err == nil || err.Code != CodeInvalidArgument || err.Field != tc.field {
			t.Errorf("%s: %+v, want invalid_argument on %s", name, err, tc.field)
		}
	}
	if err := (&CompleteTasksMultiCommand{Sections: []CompleteTasksCommand{ok, ok}}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// Every cut of a valid payload is refused, a trailing byte is refused, a
// damaged section names its field inside the section, and random damage
// never panics.
func TestCompleteMultiRefusesDamage(t *testing.T) {
	_, groups := multiHistory()
	cmd, err := EncodeCompleteTasksMulti(&CompleteTasksMultiCommand{Sections: groups[2]})
	if err != nil {
		t.Fatal(err)
	}
	p := cmd[1:]
	for n := range len(p) {
		if _, err := decodeCompleteTasksMulti(p[:n]); err == nil {
			t.Fatalf("a payload cut to %d of %d bytes decoded", n, len(p))
		}
	}
	if _, err := decodeCompleteTasksMulti(append(p[:len(p):len(p)], 0)); err == nil || err.Field != "command" {
		t.Fatalf("trailing byte: %+v", err)
	}
	// The second section's node: its length byte, then the name.
	two := CompleteTasksMultiCommand{Sections: []CompleteTasksCommand{
		{CommandMeta: meta0, Shard: 1, Epoch: 1, Node: "node-a"}, {CommandMeta: meta0, Shard: 2, Epoch: 1, Node: "node-b"}}}
	cmd, err = EncodeCompleteTasksMulti(&two)
	if err != nil {
		t.Fatal(err)
	}
	cmd[bytes.Index(cmd, []byte("node-b"))-1] = 0x7f
	if _, e := decodeCompleteTasksMulti(cmd[1:]); e == nil || e.Field != "sections[1].node" {
		t.Fatalf("got %+v, want sections[1].node", e)
	}
	rng := rand.New(rand.NewPCG(3, 22))
	for range 3000 {
		q := bytes.Clone(p)
		for range 1 + rng.IntN(4) {
			i := rng.IntN(len(q))
			switch rng.IntN(3) {
			case 0:
				q[i] = byte(rng.Uint32())
			case 1:
				q = slices.Insert(q, i, byte(rng.Uint32()))
			default:
				q = slices.Delete(q, i, i+1)
			}
		}
		checkMultiDecode(t, q)
	}
}

// checkMultiDecode decodes p; if it decodes, it must encode again (or hold
// a value only JSON carries) and decode to the same command.
func checkMultiDecode(t *testing.T, p []byte) {
	t.Helper()
	c, err := decodeCompleteTasksMulti(p)
	if err != nil {
		if err.Code != CodeInvalidArgument || err.Field == "" {
			t.Fatalf("error without a field: %+v", err)
		}
		return
	}
	again, eerr := EncodeCompleteTasksMulti(&c)
	if eerr != nil {
		return
	}
	c2, err := decodeCompleteTasksMulti(again[1:])
	if err != nil {
		t.Fatalf("re-encoded command does not decode: %v", err)
	}
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(c2)
	if !bytes.Equal(a, b) {
		t.Fatalf("decode is not stable:\n%s\n%s", a, b)
	}
}

// FuzzDecodeCompleteTasksMulti: arbitrary bytes as a complete_tasks_multi
// payload are refused with a named field or decode to a command that
// re-encodes stably; never a panic.
func FuzzDecodeCompleteTasksMulti(f *testing.F) {
	_, groups := multiHistory()
	for _, g := range groups[:6] {
		cmd, err := EncodeCompleteTasksMulti(&CompleteTasksMultiCommand{Sections: g})
		if err == nil {
			f.Add(cmd[1:])
		}
	}
	f.Add([]byte{1, 7, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkMultiDecode(t, data)
	})
}

// A node built at the log version before LogVersionCompleteMulti halts on a
// complete_tasks_multi entry; the proposer's gate keeps such entries out of
// its log.
func TestCompleteMultiEntryHaltsAnOlderLogVersion(t *testing.T) {
	old := newTestFSM(t, StateOptions{LogVersion: LogVersionCompleteMulti - 1})
	cmd, err := EncodeCompleteTasksMulti(&CompleteTasksMultiCommand{Sections: []CompleteTasksCommand{{CommandMeta: meta0, Shard: 1, Epoch: 1, Node: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	old.Apply(1, EncodeEntry(cmd, ""))
	wantHalted(t, old, 1, "command type 22 (complete_tasks_multi", fmt.Sprintf("log version %d", LogVersionCompleteMulti-1))
}
