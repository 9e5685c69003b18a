package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"fusebox/shardmap"
)

// taskCommandsForEncodings is a history of submits and completes that
// touches every field of both commands and every branch of their apply:
// duplicates by request id, both backlog limits, deadlines (clamping a
// retry), start markers, every status, output and messages, times in
// another UTC offset, and commands the FSM refuses.
func taskCommandsForEncodings() []any {
	plus2 := time.FixedZone("", 2*3600)
	at := t0
	req := json.RawMessage(`{ "url" : "http://127.0.0.1:1/cb", "body": "<&>" }`)
	var cmds []any
	var all []NewTask
	for b := range 4 {
		at = at.Add(time.Second)
		var tasks []NewTask
		for i := range 20 {
			ns, wf := "ns", fmt.Sprintf("wf-%d-%d", b, i)
			if i%3 == 0 {
				ns = "ns-ü"
			}
			t := NewTask{ID: fmt.Sprintf("%016x-%04d", at.UnixNano(), i), Shard: shardmap.ShardOf(ns, wf, taskShards), NamespaceID: ns, WorkflowID: wf,
				TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: req}
			switch i % 5 {
			case 1:
				t.RequestID = fmt.Sprintf("r-%d", i) // a duplicate from the second batch on
			case 2:
				t.Deadline = at.Add(time.Minute).In(plus2)
			case 3:
				t.DestinationKey = "http://127.0.0.1:1"
				t.MaxDestinationBacklog = 2
			case 4:
				t.MaxPendingTasks = 50
			}
			tasks = append(tasks, t)
		}
		all = append(all, tasks...)
		cmds = append(cmds, SubmitTasksCommand{CommandMeta: CommandMeta{At: at, Author: "proposer"}, Tasks: tasks, MaxShardBacklog: 15 * (b % 2)})
	}
	// A refused submit (a shard that is not ShardOf) and an empty one.
	bad := all[0]
	bad.ID, bad.Shard = "bad", (bad.Shard+1)%taskShards
	cmds = append(cmds, SubmitTasksCommand{CommandMeta: CommandMeta{At: at}, Tasks: []NewTask{bad}}, SubmitTasksCommand{CommandMeta: CommandMeta{At: at}})
	statuses := []string{TaskPending, TaskSucceeded, TaskFailed, TaskDLQ}
	for round := range 3 {
		at = at.Add(time.Second)
		byShard := map[int][]TaskResult{}
		for i, t := range all {
			r := TaskResult{TaskID: t.ID, Status: statuses[(i+round)%4], Attempts: round + 1, HTTPStatus: 500 + i%3}
			if i%8 == 0 { // retried, then a start marker
				r.Status, r.Started = TaskPending, round == 2
			}
			switch i % 4 {
			case 1:
				r.Message, r.Blocked, r.Unexpected = "refused: <dest> & more", 1, 2
			case 2:
				r.Output, r.OperationID = json.RawMessage(` {"op" : "x"} `), "op-"+t.ID
				if i%8 == 6 {
					r.Output = json.RawMessage(`null`)
				}
			}
			if r.Status == TaskPending {
				r.NextAttemptAt = at.Add(time.Duration(i) * time.Hour).In(plus2)
			}
			byShard[t.Shard] = append(byShard[t.Shard], r)
		}
		for s := range taskShards {
			node := "a"
			if s%2 == 1 {
				node = "b"
			}
			cmds = append(cmds, CompleteTasksCommand{CommandMeta: CommandMeta{At: at}, Shard: s, Epoch: 1, Node: node, Results: byShard[s]})
		}
	}
	// A complete under a stale epoch (refused with the owner), one of a
	// shard outside the map, and an invalid one (a pending result without
	// a time).
	cmds = append(cmds,
		CompleteTasksCommand{CommandMeta: CommandMeta{At: at}, Shard: 0, Epoch: 99, Node: "a"},
		CompleteTasksCommand{CommandMeta: CommandMeta{At: at}, Shard: 99, Epoch: 1, Node: "a"},
		CompleteTasksCommand{CommandMeta: CommandMeta{At: at}, Shard: 0, Epoch: 1, Node: "a", Results: []TaskResult{{TaskID: all[0].ID, Status: TaskPending}}})
	return cmds
}

// encodeTaskCommand encodes a submit or complete in one of the two encodings.
func encodeTaskCommand(t *testing.T, c any, bin bool) []byte {
	t.Helper()
	var cmd []byte
	var err error
	switch c := c.(type) {
	case SubmitTasksCommand:
		if bin {
			cmd, err = EncodeSubmitTasksBin(&c)
		} else {
			cmd, err = EncodeCommand(MsgSubmitTasks, c)
		}
	case CompleteTasksCommand:
		if bin {
			cmd, err = EncodeCompleteTasksBin(&c)
		} else {
			cmd, err = EncodeCommand(MsgCompleteTasks, c)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// The same tasks through JSON entries and through binary entries leave
// byte-identical snapshots, and every entry answers alike.
func TestBinaryAndJSONTaskEntriesAgree(t *testing.T) {
	snaps := map[bool][]byte{}
	results := map[bool][]string{}
	for _, bin := range []bool{false, true} {
		x := newTaskFSM(t)
		for i, c := range taskCommandsForEncodings() {
			cmd := encodeTaskCommand(t, c, bin)
			if bin && cmd[0] != byte(MsgSubmitTasksBin) && cmd[0] != byte(MsgCompleteTasksBin) {
				t.Fatalf("command %d: type %d", i, cmd[0])
			}
			x.idx++
			reqID := ""
			if i%2 == 0 {
				reqID = fmt.Sprintf("req-%d", i) // dedup rows hold the results
			}
			res := x.f.Apply(x.idx, EncodeEntry(cmd, reqID))
			b, _ := json.Marshal(res)
			results[bin] = append(results[bin], string(b))
		}
		snaps[bin] = snapshotBytes(t, x.f)
	}
	if d := cmp.Diff(results[false], results[true]); d != "" {
		t.Fatalf("results differ (-json +binary):\n%s", d)
	}
	if !bytes.Equal(snaps[false], snaps[true]) {
		t.Fatalf("snapshots differ:\n%s", cmp.Diff(string(snaps[false]), string(snaps[true])))
	}
	// The history is not trivial: it accepted, refused and completed tasks.
	for _, want := range []string{`"outcome":"duplicate"`, `"reason":"destination_backlog"`, `"reason":"pending_limit"`, `"reason":"shard_backlog"`, `"refused":{`, `"code":"invalid_argument"`} {
		if !bytes.Contains([]byte(fmt.Sprint(results[true])), []byte(want)) {
			t.Errorf("no result has %s", want)
		}
	}
	for _, want := range []string{`"status":"dlq"`, `"attempt_epoch":1`, `"output":{"op":"x"}`, `+02:00`, `\u003c`} {
		if !bytes.Contains(snaps[true], []byte(want)) {
			t.Errorf("snapshot has no %s", want)
		}
	}
}

func TestBinaryTaskCommandsRoundTrip(t *testing.T) {
	for i, c := range taskCommandsForEncodings() {
		cmd := encodeTaskCommand(t, c, true)
		var got any
		var err *Error
		switch MessageType(cmd[0]) {
		case MsgSubmitTasksBin:
			got, err = decodeSubmitTasksBin(cmd[1:])
		case MsgCompleteTasksBin:
			got, err = decodeCompleteTasksBin(cmd[1:])
		}
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		// Compared as JSON: the binary form carries what the JSON one does.
		want, _ := json.Marshal(c)
		have, _ := json.Marshal(got)
		if !bytes.Equal(want, have) {
			t.Fatalf("command %d:\n json %s\n  bin %s", i, want, have)
		}
	}
}

// The binary encoders size their buffer once: a guess that fell short made
// it grow by copying, at the size of a whole batch. (A request or output
// that needs canonicalising allocates for that besides.)
func TestBinaryTaskEncodersAllocateOnce(t *testing.T) {
	var tasks []NewTask
	var results []TaskResult
	for i := range 500 {
		id := NewTaskID(t0.Add(time.Duration(i)))
		tasks = append(tasks, NewTask{ID: id, Shard: i % taskShards, NamespaceID: "namespace-of-the-bench",
			WorkflowID: fmt.Sprintf("workflow-%d", i), TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:65535/callback/path",
			DestinationKey: "http://127.0.0.1:65535", RequestID: fmt.Sprintf("request-%d", i), Deadline: t0.Add(time.Hour),
			Request: json.RawMessage(`{"url":"http://127.0.0.1:65535/callback/path","body":"eyJyZXN1bHQiOiJvayJ9"}`)})
		results = append(results, TaskResult{TaskID: id, Status: TaskPending, Attempts: 3, Blocked: 1, Unexpected: 2,
			NextAttemptAt: t0.Add(time.Minute), Message: "503 Service Unavailable: the destination is overloaded", HTTPStatus: 503,
			OperationID: "operation-id-from-the-handler", Output: json.RawMessage(`{"answer":"forty-two","unit":"words"}`), Started: true})
	}
	submit := SubmitTasksCommand{CommandMeta: CommandMeta{At: t0, Author: "node-with-a-long-name"}, MaxShardBacklog: 100_000, Tasks: tasks}
	complete := CompleteTasksCommand{CommandMeta: CommandMeta{At: t0, Author: "node-with-a-long-name"}, Shard: 3, Epoch: 1 << 40,
		Node: "node-with-a-long-name", Results: results}
	for name, encode := range map[string]func() error{
		"submit":   func() error { _, err := EncodeSubmitTasksBin(&submit); return err },
		"complete": func() error { _, err := EncodeCompleteTasksBin(&complete); return err },
	} {
		var err error
		if n := testing.AllocsPerRun(5, func() { err = encode() }); err != nil || n != 1 {
			t.Errorf("%s: %v allocations (%v), want 1", name, n, err)
		}
	}
}

// Every cut of a valid payload, and every single-byte change of one, is
// refused or decodes to a command that encodes back to itself; none panics.
func TestBinaryTaskCommandsRefuseDamage(t *testing.T) {
	cmds := taskCommandsForEncodings()
	for _, c := range []any{cmds[0], cmds[len(cmds)-4]} {
		cmd := encodeTaskCommand(t, c, true)
		for n := range len(cmd) - 1 {
			if _, err := decodeTaskCommandBin(MessageType(cmd[0]), cmd[1:1+n]); err == nil {
				t.Fatalf("type %d: a payload cut to %d of %d bytes decoded", cmd[0], n, len(cmd)-1)
			}
		}
		if _, err := decodeTaskCommandBin(MessageType(cmd[0]), append(cmd[1:len(cmd):len(cmd)], 0)); err == nil || err.Field != "command" {
			t.Fatalf("trailing byte: %v", err)
		}
		for i := 1; i < len(cmd); i += 7 {
			p := bytes.Clone(cmd[1:])
			p[i-1] ^= 0xa5
			checkBinaryDecode(t, MessageType(cmd[0]), p)
		}
		// Random damage: a few bytes changed, inserted or removed.
		rng := rand.New(rand.NewPCG(1, uint64(cmd[0])))
		for range 3000 {
			p := bytes.Clone(cmd[1:])
			for range 1 + rng.IntN(4) {
				i := rng.IntN(len(p))
				switch rng.IntN(3) {
				case 0:
					p[i] = byte(rng.Uint32())
				case 1:
					p = slices.Insert(p, i, byte(rng.Uint32()))
				default:
					p = slices.Delete(p, i, i+1)
				}
			}
			checkBinaryDecode(t, MessageType(cmd[0]), p)
		}
	}
}

func TestBinaryTaskCommandsNameTheBadField(t *testing.T) {
	c := SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{newTaskFor("t1", "ns", "wf", ""), newTaskFor("t2", "ns", "wf2", "")}}
	cmd, err := EncodeSubmitTasksBin(&c)
	if err != nil {
		t.Fatal(err)
	}
	// The second task's id: its length byte, then "t2".
	i := bytes.LastIndex(cmd, []byte("t2"))
	cmd[i] = 0xff
	_, e := decodeSubmitTasksBin(cmd[1:])
	if e == nil || e.Field != "tasks[1].id" || e.Code != CodeInvalidArgument {
		t.Fatalf("got %+v, want invalid_argument on tasks[1].id", e)
	}
	// An overlong varint (0 written in two bytes) is refused.
	_, e = decodeCompleteTasksBin([]byte{0, 0, 0x80, 0x00})
	if e == nil || e.Field != "shard" {
		t.Fatalf("overlong varint: %+v", e)
	}
}

// A value the binary form would not carry as JSON does sends the command as
// JSON (errNotBinary), so the two types never diverge.
func TestBinaryEncodingFallsBackToJSON(t *testing.T) {
	nt := newTaskFor("t1", "ns", "wf", "")
	cases := map[string]any{
		"invalid UTF-8":    SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{func() NewTask { x := nt; x.WorkflowID = "w\xff"; return x }()}},
		"year 10000":       SubmitTasksCommand{CommandMeta: CommandMeta{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		"offset seconds":   CompleteTasksCommand{CommandMeta: CommandMeta{At: t0.In(time.FixedZone("", 30))}},
		"unknown status":   CompleteTasksCommand{CommandMeta: meta0, Results: []TaskResult{{TaskID: "x", Status: "done"}}},
		"message not UTF8": CompleteTasksCommand{CommandMeta: meta0, Results: []TaskResult{{TaskID: "x", Status: TaskFailed, Message: "\xc3"}}},
	}
	for name, c := range cases {
		var err error
		switch c := c.(type) {
		case SubmitTasksCommand:
			_, err = EncodeSubmitTasksBin(&c)
		case CompleteTasksCommand:
			_, err = EncodeCompleteTasksBin(&c)
		}
		if !errors.Is(err, errNotBinary) {
			t.Errorf("%s: err %v, want errNotBinary", name, err)
		}
	}
}

// decodeTaskCommandBin decodes either binary type.
func decodeTaskCommandBin(t MessageType, p []byte) (any, *Error) {
	if t == MsgSubmitTasksBin {
		return decodeSubmitTasksBin(p)
	}
	return decodeCompleteTasksBin(p)
}

// checkBinaryDecode decodes p; if it decodes, it must encode again (or be
// a value only JSON carries) and decode to the same command.
func checkBinaryDecode(t *testing.T, typ MessageType, p []byte) {
	t.Helper()
	c, err := decodeTaskCommandBin(typ, p)
	if err != nil {
		if err.Code != CodeInvalidArgument || err.Field == "" {
			t.Fatalf("error without a field: %+v", err)
		}
		return
	}
	var again []byte
	var eerr error
	switch c := c.(type) {
	case SubmitTasksCommand:
		again, eerr = EncodeSubmitTasksBin(&c)
	case CompleteTasksCommand:
		again, eerr = EncodeCompleteTasksBin(&c)
	}
	if eerr != nil {
		return // e.g. a request that is not JSON: validate refuses it at apply
	}
	c2, err := decodeTaskCommandBin(typ, again[1:])
	if err != nil {
		t.Fatalf("re-encoded command does not decode: %v", err)
	}
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(c2)
	if !bytes.Equal(a, b) {
		t.Fatalf("decode is not stable:\n%s\n%s", a, b)
	}
}

// FuzzDecodeTaskCommandsBin: arbitrary bytes as either binary payload are
// refused with a named field or decode to a command that re-encodes
// stably; never a panic.
func FuzzDecodeTaskCommandsBin(f *testing.F) {
	for _, c := range taskCommandsForEncodings()[:6] {
		var cmd []byte
		switch c := c.(type) {
		case SubmitTasksCommand:
			cmd, _ = EncodeSubmitTasksBin(&c)
		case CompleteTasksCommand:
			cmd, _ = EncodeCompleteTasksBin(&c)
		}
		f.Add(cmd)
	}
	f.Add([]byte{byte(MsgCompleteTasksBin), 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		typ := MsgSubmitTasksBin
		if data[0]%2 == 1 {
			typ = MsgCompleteTasksBin
		}
		checkBinaryDecode(t, typ, data[1:])
	})
}

// canonicalJSON holds only for values json.Marshal leaves as they are.
func TestCanonicalJSONMatchesMarshal(t *testing.T) {
	for _, v := range []string{`{"a":1}`, `{"a":"b c"}`, `{ "a":1}`, `{"a":"<"}`, `{"a":"\u003c"}`, "{\"a\":\"\u2028\"}", `[1,2]`, `{"a":{"b":[true,null]}}`, "{\"a\":\"é\"}"} {
		m, err := json.Marshal(json.RawMessage(v))
		if err != nil {
			t.Fatal(err)
		}
		if canonicalJSON([]byte(v)) && string(m) != v {
			t.Errorf("%s: canonical, but json.Marshal writes %s", v, m)
		}
	}
}

func TestSubmitOutcomesJSONMatchesMarshal(t *testing.T) {
	for _, o := range []submitOutcomes{nil, {}, {{TaskID: "a", Shard: 3, Outcome: SubmitAccepted}},
		{{TaskID: "t\"<é>\u2028&\\", Shard: -1, Outcome: SubmitOverloaded, Reason: OverloadPending}, {TaskID: "", Outcome: SubmitDuplicate, Reason: "x\x01"}}} {
		want, err := json.Marshal([]SubmitOutcome(o))
		if err != nil {
			t.Fatal(err)
		}
		if got := o.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("appendJSON %s, json.Marshal %s", got, want)
		}
	}
}

// A node built at the log version before LogVersionTasksBin halts on a
// binary task entry instead of guessing at it; the proposer's gate keeps
// such entries out of its log.
func TestBinaryTaskEntryHaltsAnOlderLogVersion(t *testing.T) {
	old := newTestFSM(t, StateOptions{LogVersion: LogVersionTasksBin - 1})
	c := SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{newTaskFor("t1", "ns", "wf", "")}}
	cmd, err := EncodeSubmitTasksBin(&c)
	if err != nil {
		t.Fatal(err)
	}
	old.Apply(1, EncodeEntry(cmd, ""))
	wantHalted(t, old, 1, "command type 20 (submit_tasks_bin", fmt.Sprintf("log version %d", LogVersionTasksBin-1))
}

func TestHasControlCharMatchesRunes(t *testing.T) {
	byRunes := func(s string) bool {
		return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
	}
	rng := rand.New(rand.NewPCG(7, 7))
	alphabet := []byte{0x00, 0x01, 0x1f, 0x20, 'a', 0x7e, 0x7f, 0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0x80, 0xa8, 0xf0, 0x9f, 0xff}
	for range 20000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if s := string(b); hasControlChar(s) != byRunes(s) {
			t.Fatalf("%q: bytes %v, runes %v", s, hasControlChar(s), byRunes(s))
		}
	}
}

// The proposer's result value before encoding (ApplyResult.Typed) is what
// decoding Value gives; a deduplicated retry carries none (its caller
// decodes the stored bytes).
func TestTypedResultIsTheDecodedValue(t *testing.T) {
	x := newTaskFSM(t)
	c := SubmitTasksCommand{CommandMeta: meta0, Tasks: []NewTask{newTaskFor("t1", "ns", "wf", "r1"), newTaskFor("t2", "ns", "wf", "r1")}}
	cmd, err := EncodeSubmitTasksBin(&c)
	if err != nil {
		t.Fatal(err)
	}
	res := x.f.Apply(x.idx+1, EncodeEntry(cmd, "req-1"))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var decoded []SubmitOutcome
	if err := json.Unmarshal(res.Value, &decoded); err != nil {
		t.Fatal(err)
	}
	typed, ok := res.Typed.([]SubmitOutcome)
	if !ok || !reflect.DeepEqual(typed, decoded) || len(typed) != 2 || typed[1].Outcome != SubmitDuplicate {
		t.Fatalf("Typed = %#v, decoded Value = %#v", res.Typed, decoded)
	}
	again := x.f.Apply(x.idx+2, EncodeEntry(cmd, "req-1"))
	if again.Typed != nil || !bytes.Equal(again.Value, res.Value) || again.Index != x.idx+1 {
		t.Fatalf("retry: %+v, want the stored bytes of index %d and no typed value", again, x.idx+1)
	}
}
