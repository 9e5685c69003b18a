package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"

	"fusebox/transport"
)

// submitSeeds are submit bodies the fast decode must read exactly as
// encoding/json does, and bodies it must refuse as encoding/json does.
func submitSeeds(t testing.TB) []string {
	one := TaskSubmit{
		NamespaceID: "ns", WorkflowID: "wf-1", TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:9/cb",
		RequestID: "r-1", ScheduleToCloseTimeout: "30s",
		Request: TaskRequest{NexusRequestID: "n-1", Body: []byte(`{"ok":true}`), ContentType: "application/json",
			CallbackURL: "http://x/cb", CallbackHeader: map[string]string{"a": "b", "C": "d"}},
	}
	start := TaskSubmit{NamespaceID: "ns", WorkflowID: "wf-2", TaskGroup: "nexusoperations.Invocation", Destination: "ep",
		Request: TaskRequest{Service: "svc", Operation: "op", Input: json.RawMessage(`{"x":[1,2.5,"é",null]}`)}}
	done := TaskSubmit{NamespaceID: "ns", WorkflowID: "wf-3", TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:9/cb",
		Request: TaskRequest{Completion: &transport.Completion{}}}
	var out []string
	for _, v := range []any{one, start, done, TaskBatchSubmit{Tasks: []TaskSubmit{one, start, done}}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return append(out,
		`{"namespace_id":"ns","NAMESPACE_ID":"other"}`, // case-insensitive keys, the last one wins
		`{"namespace_id":"a","namespace_id":"b"}`,
		`{"namespace_ıd":"x"}`, `{"namespace_\u0069d":"esc"}`,
		`{"request":{"callback_header":{"a":"1"},"callback_header":{"b":"2"}}}`, // a repeated map merges
		`{"namespace_id":"ns","unknown":1}`, `{"tasks":[{"bogus":true}]}`,
		`{"namespace_id":"ns"} {"x":1}`, `{"namespace_id":"ns"}  `+"\n", `{"namespace_id":"ns"}x`,
		`{"namespace_id":null,"request":null}`, `{"namespace_id":1}`, `{"request":{"body":"!!"}}`,
		`{"request":{"body":"eyJvayI6dHJ1ZX0="}}`, `{"request":{"input":{"a":1}}}`, `{"request":{"input":12}}`,
		`{"tasks":null}`, `{"tasks":{}}`, `[]`, `null`, ``, `{`, `{"tasks":[null]}`,
		`{"namespace_id":"\ud83d\ude00\u00e9"}`, `{"request":{"completion":{}}}`, `{"schedule_to_close_timeout":"1d"}`,
	)
}

// TestDecodeStrictMatchesStd: the seeds decode to what encoding/json gives,
// and are refused with its very error; the well-formed submits (the first
// four seeds) take the fast path.
func TestDecodeStrictMatchesStd(t *testing.T) {
	for i, s := range submitSeeds(t) {
		checkDecodeStrict(t, []byte(s))
		if i < 4 {
			var v TaskBatchSubmit
			var one TaskSubmit
			dec := gojson.NewDecoder(strings.NewReader(s))
			dec.DisallowUnknownFields()
			target := any(&one)
			if strings.HasPrefix(s, `{"tasks"`) {
				target = &v
			}
			if err := dec.Decode(target); err != nil {
				t.Errorf("seed %d: goccy refused a well-formed submit, so the fast path is never taken: %v", i, err)
			}
		}
	}
}

// FuzzDecodeSubmit holds the submit routes' fast decode to encoding/json's:
// on every body whose text the API accepts (checkJSONText), the same
// refusal (nil or not, and the same error) and, when both accept, the same
// value, for a single submit and a batch.
func FuzzDecodeSubmit(f *testing.F) {
	for _, s := range submitSeeds(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkJSONText(b) != nil {
			return // refused whatever the decode said
		}
		checkDecodeStrict(t, b)
	})
}

func checkDecodeStrict(t *testing.T, b []byte) {
	t.Helper()
	compare(t, b, func() any { return new(TaskSubmit) })
	compare(t, b, func() any { return new(TaskBatchSubmit) })
}

func compare(t *testing.T, b []byte, fresh func() any) {
	t.Helper()
	got, want := fresh(), fresh()
	err, wantErr := decodeStrict(b, got), decodeStrictStd(b, want)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("%T %q: error %v, encoding/json %v", got, trim(b), err, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%T %q:\n got %#v\nwant %#v", got, trim(b), got, want)
	}
}

func trim(b []byte) string {
	s := string(b)
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// BenchmarkDecodeSubmitBatch is a batch of 500 callback submits (about
// 140 KB) decoded as the batch route does (fast: decodeStrict into a slice
// sized as readSubmitBatch sizes it), by decodeStrict into an empty value
// (unsized) and by encoding/json alone (std: decodeStrictStd); per batch.
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
	for _, side := range []struct {
		name   string
		sized  bool
		decode func([]byte, any) error
	}{{"fast", true, decodeStrict}, {"unsized", false, decodeStrict}, {"std", false, decodeStrictStd}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var v TaskBatchSubmit
				if side.sized {
					v.Tasks = make([]TaskSubmit, 0, min(bytes.Count(raw, []byte(`"namespace_id"`)), MaxTaskBatchSubmit))
				}
				if err := side.decode(raw, &v); err != nil || len(v.Tasks) != 500 {
					b.Fatal(err, len(v.Tasks))
				}
			}
		})
	}
}
