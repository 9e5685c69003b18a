package fastjson_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"fusebox/api"
	"fusebox/internal/fastjson"
	"fusebox/raftstore/state"
)

// resultSeeds are the apply results a proposer decodes (a follower's
// forwarded submit or complete), and a few no leader writes.
func resultSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	outs, err := json.Marshal([]state.SubmitOutcome{{TaskID: "t1", Shard: 3, Outcome: state.SubmitAccepted},
		{TaskID: "t2", Shard: 0, Outcome: state.SubmitOverloaded, Reason: state.OverloadPending}})
	if err != nil {
		tb.Fatal(err)
	}
	var seeds [][]byte
	for _, v := range []any{
		state.ApplyResult{Value: outs, Index: 42},
		state.ApplyResult{Err: &state.Error{Code: state.CodeConflict, Field: "shard", Message: "no"}, Index: 7},
		state.CompleteOutcome{Applied: 3, Ignored: 1, Refused: &state.RefusedShard{Shard: 2, Owner: "n2", Epoch: 9}},
		[]state.CompleteOutcome{{Applied: 1}, {Ignored: 2}},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return append(seeds, outs, []byte(`{"value":{"a":},"index":1}`), []byte(`{"index":-1}`), []byte(`{"Index":1,"index":2}`),
		[]byte(`[{"task_id":"\ud800","shard":1e2}]`), []byte(`{"error":{"code":"x"}} x`), []byte(`null`), []byte(``))
}

// decodeAll decodes b into each type the package serves, with decode: the
// values and the errors' texts.
func decodeAll(b []byte, decode func([]byte, any) error) []any {
	var out []any
	for _, v := range []any{new(state.ApplyResult), new([]state.SubmitOutcome), new(state.CompleteOutcome), new([]state.CompleteOutcome)} {
		err := decode(b, v)
		out = append(out, fmt.Sprint(err), v)
	}
	return out
}

// TestUnmarshalIsEncodingJSONs: each seed decodes (or is refused, with the
// same error) as encoding/json decodes it, into each type.
func TestUnmarshalIsEncodingJSONs(t *testing.T) {
	for _, b := range resultSeeds(t) {
		if got, want := decodeAll(b, fastjson.Unmarshal), decodeAll(b, json.Unmarshal); !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %v\nwant %v", b, got, want)
		}
	}
}

// TestUnmarshalRefusesWhatEncodingJSONRefuses: a nil or non-pointer
// target is encoding/json's InvalidUnmarshalError, not a panic.
func TestUnmarshalRefusesWhatEncodingJSONRefuses(t *testing.T) {
	var nilPtr *state.ApplyResult
	for _, v := range []any{nil, state.ApplyResult{}, nilPtr} {
		err, want := fastjson.Unmarshal([]byte(`{"index":1}`), v), json.Unmarshal([]byte(`{"index":1}`), v)
		if want == nil || fmt.Sprint(err) != fmt.Sprint(want) {
			t.Errorf("%#v: %v, encoding/json %v", v, err, want)
		}
	}
}

// FuzzUnmarshal: whatever the bytes, Unmarshal never panics and gives
// encoding/json's answer for every type the package serves.
func FuzzUnmarshal(f *testing.F) {
	for _, b := range resultSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := decodeAll(b, fastjson.Unmarshal), decodeAll(b, json.Unmarshal); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", b, got, want)
		}
	})
}

// validSeeds are JSON texts at the grammar's edges.
var validSeeds = []string{`{}`, `[1,2]`, `"\u00e9"`, "\"\xff\"", `01`, `1.`, `-`, `1e`, `-0.0e+1`, "\"\x01\"", `"\ud800"`,
	`{"a":1,}`, "[1]\x00", `  null `, `tru`, `"\x"`, `{"a" 1}`, `[`, ``, ` `, "\t\n\r1\n"}

// TestValidIsEncodingJSONs: Valid agrees with json.Valid on the seeds.
func TestValidIsEncodingJSONs(t *testing.T) {
	for _, s := range validSeeds {
		if got, want := fastjson.Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("%q: Valid %v, json.Valid %v", s, got, want)
		}
	}
}

// FuzzValid: Valid and json.Valid give the same answer on any input.
func FuzzValid(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := fastjson.Valid(b), json.Valid(b); got != want {
			t.Fatalf("%q: Valid %v, json.Valid %v", b, got, want)
		}
	})
}

// BenchmarkValid is a stored callback request checked by json.Valid (std)
// and by Valid (goccy).
func BenchmarkValid(b *testing.B) {
	req := []byte(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:9/cb","request_id":"r-123","body":"eyJyZXN1bHQiOiJyLTEyMyJ9","content_type":"application/json"}`)
	for name, valid := range map[string]func([]byte) bool{"std": json.Valid, "goccy": fastjson.Valid} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if !valid(req) {
					b.Fatal("refused")
				}
			}
		})
	}
}

// marshalAll builds every type encoded through Marshal from the fuzzer's
// values: the leader's answer to a forwarded write (an apply result whose
// value is raw bytes that need not be JSON) and a batch submit's answer.
func marshalAll(raw []byte, s string, n int64) []any {
	return []any{
		state.ApplyResult{Value: raw, Index: uint64(n)},
		state.ApplyResult{Err: &state.Error{Code: state.CodeConflict, Field: s, Message: s}, Index: uint64(n) >> 1},
		api.TaskBatchAccepted{Results: []api.TaskBatchItem{{TaskID: s, Shard: int(n), Outcome: s, Reason: s}, {}}, RetryAfter: int(n % 7)},
		api.TaskAccepted{TaskID: s, Shard: int(n), Duplicate: n%2 == 0},
	}
}

var marshalSeeds = []struct {
	raw []byte
	s   string
	n   int64
}{
	{[]byte(`[{"task_id":"t","shard":1,"outcome":"accepted"}]`), "t1", 42},
	{[]byte(` { "a" : [1, 2.50, "<&>\u2028"] } `), "<&>\u2028\u2029\x00é\xff", -1},
	{[]byte(`{"a":`), "", 0}, {nil, "\"\\/", 1 << 62}, {[]byte(`nul`), "\xed\xa0\x80", 7},
}

// TestMarshalIsEncodingJSONs: the seeds encode to encoding/json's bytes.
func TestMarshalIsEncodingJSONs(t *testing.T) {
	for _, sd := range marshalSeeds {
		checkMarshal(t, sd.raw, sd.s, sd.n)
	}
}

// FuzzMarshal: Marshal writes encoding/json's bytes, and refuses what it
// refuses with its error, for every type encoded through it.
func FuzzMarshal(f *testing.F) {
	for _, sd := range marshalSeeds {
		f.Add(sd.raw, sd.s, sd.n)
	}
	f.Fuzz(checkMarshal)
}

func checkMarshal(t *testing.T, raw []byte, s string, n int64) {
	for _, v := range marshalAll(raw, s, n) {
		got, err := fastjson.Marshal(v)
		want, wantErr := json.Marshal(v)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n got %s %v\nwant %s %v", v, got, err, want, wantErr)
		}
	}
}
