package transport_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// requestSeeds are stored requests of every shape tasks.New writes, and a
// few it never does.
func requestSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	reqs := []transport.Request{
		{TaskGroup: breakerpool.TaskGroupCallback, URL: "http://127.0.0.1:1/cb", RequestID: "r1", Body: []byte(`{"result":"x"}`), ContentType: "application/json"},
		{TaskGroup: breakerpool.TaskGroupCallback, URL: "https://h/cb?sig=1", Header: map[string]string{"Authorization": "Bearer t", "X-É": "<&>"},
			Completion: &transport.Completion{State: transport.CompletionSucceeded, Result: json.RawMessage(`{"a":[1,2.5e3,null,"\u2028"]}`), OperationToken: "tok",
				StartTime: time.Date(2026, 12, 3, 1, 2, 3, 456789, time.FixedZone("x", 3600))}},
		{TaskGroup: breakerpool.TaskGroupCallback, URL: "http://h/", Completion: &transport.Completion{State: transport.CompletionFailed, FailureMessage: "boom \x01 \ufffd"}},
		{TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: "http://h/nexus", Service: "svc", Operation: "op", Input: json.RawMessage(`"in"`),
			RequestID: "rid", CallbackURL: "http://cb/", CallbackHeader: map[string]string{"k": "v"}, Timeout: 1500 * time.Millisecond},
		{TaskGroup: breakerpool.TaskGroupNexusCancelation, URL: "http://h/nexus", Service: "svc", Operation: "op", OperationID: "opid"},
	}
	var out [][]byte
	for _, r := range reqs {
		b, err := json.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, []byte(`{}`), []byte(`null`), []byte(`{"url":1}`), []byte(`{"body":"not base64!"}`), []byte(`{"URL":"x","Task_Group":"y"}`),
		[]byte(`{"url":"a","url":"b"}`), []byte(`{"timeout":1e3}`), []byte(`{"header":{"a":null}}`), []byte(`{"completion":null}`),
		[]byte(`{"url":"\ud800"}`), []byte("{\"url\":\"\xff\"}"), []byte(`{"input":{"a":}}`), []byte(`{} x`), []byte(` {"namespace":"n"} `))
}

// TestDecodeRequestIsEncodingJSONs: every stored shape decodes to
// encoding/json's value, and what encoding/json refuses is refused with
// its error. The values are compared after every decode is done, so a
// value that shared the decoder's reused buffer would show the later
// decodes' bytes; and the input is left as it was.
func TestDecodeRequestIsEncodingJSONs(t *testing.T) {
	seeds := requestSeeds(t)
	got := make([]transport.Request, len(seeds))
	errs := make([]error, len(seeds))
	for i, b := range seeds {
		in := slices.Clone(b)
		got[i], errs[i] = transport.DecodeRequest(b)
		if !bytes.Equal(b, in) {
			t.Fatalf("DecodeRequest changed its input %q to %q", in, b)
		}
	}
	for i, b := range seeds {
		var want transport.Request
		wantErr := json.Unmarshal(b, &want)
		if err := errs[i]; (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%s: error %v, encoding/json %v", b, err, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got[i], want) {
			t.Errorf("%s:\n got %#v\nwant %#v", b, got[i], want)
		}
	}
}

// FuzzDecodeRequest: whatever the bytes, DecodeRequest never panics and
// gives encoding/json's answer: its value when it accepts them, its error
// when it does not.
func FuzzDecodeRequest(f *testing.F) {
	for _, b := range requestSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want transport.Request
		wantErr := json.Unmarshal(b, &want)
		got, err := transport.DecodeRequest(b)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: error %v, encoding/json %v", b, err, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", b, got, want)
		}
	})
}

// FuzzEncodeRequest: EncodeRequest writes encoding/json's bytes for every
// request a stored one decodes to, with any input bytes (a caller's
// json.RawMessage need not be JSON), and refuses what encoding/json
// refuses, with its error.
func FuzzEncodeRequest(f *testing.F) {
	for _, b := range requestSeeds(f) {
		f.Add(b, []byte(nil))
	}
	f.Add(requestSeeds(f)[0], []byte(` { "a" : [1, 2.50, 1e3, "<&>"] } `))
	f.Add(requestSeeds(f)[0], []byte(`{"a":`))
	f.Add(requestSeeds(f)[0], []byte("\"\xff\u2028\""))
	f.Fuzz(func(t *testing.T, b, input []byte) {
		var r transport.Request
		if json.Unmarshal(b, &r) != nil {
			return
		}
		if input != nil {
			r.Input = input
		}
		want, wantErr := json.Marshal(&r)
		got, err := transport.EncodeRequest(&r)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("%q / input %q: error %v, encoding/json %v", b, input, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q / input %q:\n got %s\nwant %s", b, input, got, want)
		}
	})
}

// BenchmarkEncodeRequest is a stored callback request encoded by
// EncodeRequest (goccy) and by encoding/json (std).
func BenchmarkEncodeRequest(b *testing.B) {
	r := transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: "http://127.0.0.1:9/cb", RequestID: "r-123",
		Body: []byte(`{"result":"r-123"}`), ContentType: "application/json"}
	for _, side := range []struct {
		name   string
		encode func(*transport.Request) ([]byte, error)
	}{{"goccy", transport.EncodeRequest}, {"std", func(r *transport.Request) ([]byte, error) { return json.Marshal(r) }}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := side.encode(&r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
