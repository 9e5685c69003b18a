package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"fusebox/breakerpool"
	"fusebox/raftstore/raftstoretest"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// rawCall sends body byte for byte (the Go client would re-encode invalid
// UTF-8 as U+FFFD) and decodes the API error, if any.
func rawCall(t *testing.T, base, method, path string, body []byte, hdr map[string]string) (int, *Error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb errorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb.Error
}

// Invalid UTF-8 anywhere an id or a name arrives — body fields (nested
// too), path values, query parameters, the request-id header — is a 400
// naming the field, and nothing is stored.
func TestInvalidUTF8IsRefusedNamingTheField(t *testing.T) {
	store := raftstoretest.SingleNode(t, "n1", testShards)
	svc := newTaskService(store)
	if _, err := store.PutEndpoint(t.Context(), state.PutEndpointCommand{Name: "ep", URL: "http://127.0.0.1:9/nexus"}); err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, Deps{Store: store, State: store.Reader(), Breakers: noBreakers{}}, nil)
	s.taskRoutes(svc)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)

	task := func(ns, wf string) string {
		return `{"namespace_id":"` + ns + `","workflow_id":"` + wf + `","task_group":"callbacks.Invocation",` +
			`"destination":"http://127.0.0.1:9/cb","request":{"completion":{"state":"succeeded"}}}`
	}
	for _, tc := range []struct {
		name, method, path, body, field string
		hdr                             map[string]string
	}{
		{"task namespace (raw byte)", "POST", "/v1/tasks", task("ns-\xff", "wf"), "namespace_id", nil},
		{"task workflow id (lone surrogate)", "POST", "/v1/tasks", task("ns", `wf-\udc80`), "workflow_id", nil},
		{"task workflow id (high surrogate, no low)", "POST", "/v1/tasks", task("ns", `wf-\ud800x`), "workflow_id", nil},
		{"batch task namespace", "POST", "/v1/tasks:batch", `{"tasks":[` + task("ns", "wf") + `,` + task("n\xc3", "wf") + `]}`, "tasks[1].namespace_id", nil},
		{"request id header", "POST", "/v1/tasks", task("ns", "wf"), "X-Request-Id", map[string]string{"X-Request-Id": "rid-\xff"}},
		{"task id in the path", "GET", "/v1/tasks/t-%FF", "", "id", nil},
		{"config key in the path", "PUT", "/v1/config/breaker%C3", `{"value":{"a":1}}`, "key", nil},
		{"endpoint name in the path", "PUT", "/v1/endpoints/ep-%80", `{"url":"http://127.0.0.1:9/"}`, "name", nil},
		{"namespace query parameter", "GET", "/v1/config/k?namespace=ns%FF", "", "namespace", nil},
		{"forced breaker namespace", "POST", "/v1/breakers/force", "{\"task_group\":\"callbacks.Invocation\",\"namespace\":\"\xff\",\"destination\":\"d\",\"mode\":\"open\"}", "namespace", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			status, e := rawCall(t, hs.URL, tc.method, tc.path, body, tc.hdr)
			if status != http.StatusBadRequest || e == nil || e.Code != CodeInvalidArgument {
				t.Fatalf("status %d, error %+v; want 400 invalid_argument", status, e)
			}
			if tc.field != "" && e.Field != tc.field {
				t.Fatalf("field %q (%s); want %q", e.Field, e.Message, tc.field)
			}
			if !strings.Contains(e.Message, "UTF-8") || !utf8.ValidString(e.Message) {
				t.Fatalf("message %q does not say UTF-8 (or is not UTF-8 itself)", e.Message)
			}
		})
	}
	if n := len(store.Reader().Config()); n != 0 {
		t.Fatalf("%d config entries stored", n)
	}
	if _, ok := store.Reader().Endpoint("ep-\uFFFD"); ok {
		t.Fatal("endpoint stored under a U+FFFD name")
	}
	if f := store.Reader().ForcedBreakers(); len(f) != 0 {
		t.Fatalf("forced breakers stored: %+v", f)
	}

	// Valid text — a surrogate pair, an escaped backslash before "ud800",
	// and a literal U+FFFD — still goes through.
	for _, wf := range []string{`wf-\ud83d\ude00`, `wf-\\ud800`, "wf-\uFFFD", "wf-é"} {
		if status, e := rawCall(t, hs.URL, "POST", "/v1/tasks", []byte(task("ns", wf)), nil); status != http.StatusAccepted {
			t.Fatalf("workflow id %s: status %d, %+v", wf, status, e)
		}
	}
}

func TestCheckJSONTextPaths(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":"ok","b":{"c":["x","y\udfff"]}}`:    "b.c[1]",
		"[{\"a\":1},{\"b\":\"\xff\"}]":            "[1].b",
		`{"a":[[1,2],["\ud800\ud800"]],"z":"ok"}`: "a[1][0]",
		"\"\xed\xa0\x80\"":                        "",
		"{\"a\":{\"k\xfe\":1}}":                   "a",
	} {
		err := checkJSONText([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Field != want {
			t.Errorf("%q: %v; want field %q", body, err, want)
		}
	}
	for _, body := range []string{`{}`, `{"a":"\u00e9\ud83d\ude00","b":["\\ud800"]}`, `[1,"x",null,true,{"k":"v"}]`} {
		if err := checkJSONText([]byte(body)); err != nil {
			t.Errorf("%q refused: %v", body, err)
		}
	}
}

// FuzzCheckJSONText: never panics, and a JSON document it accepts decodes
// without any replacement character that was not in the input.
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":"\udc00"}`, "{\"a\":\"\xff\"}", `["\ud83d\ude00",{"k":["\\ud800"]}]`, `"\ufffd"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkJSONText(b)
		if err != nil || !json.Valid(b) {
			return
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		literal := bytes.Count(b, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(b), []byte(`\ufffd`))
		if got := countFFFD(v); got > literal {
			t.Fatalf("accepted %q, which decodes with %d replacement characters (%d in the input)", b, got, literal)
		}
	})
}

func countFFFD(v any) int {
	switch x := v.(type) {
	case string:
		return strings.Count(x, "\uFFFD")
	case []any:
		n := 0
		for _, e := range x {
			n += countFFFD(e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += strings.Count(k, "\uFFFD") + countFFFD(e)
		}
		return n
	}
	return 0
}

// POST /v1/shards/{id}/close: an empty or null body no longer closes
// without the epoch check; the unfenced close needs "force": true; a
// negative epoch is a 400 naming epoch.
func TestShardCloseNeedsEpochOrForce(t *testing.T) {
	m, _ := shardmap.New(4)
	m, _, _ = shardmap.Rebalance(m, []string{"n1", "n2"}, nil)
	f := &fakeShards{m: m}
	s := New(Config{}, Deps{Shards: f}, nil)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	for body, field := range map[string]string{
		"":                         "epoch",
		"null":                     "epoch",
		"{}":                       "epoch",
		`{"force":false}`:          "epoch",
		`{"epoch":-1}`:             "epoch",
		`{"epoch":1.5}`:            "epoch",
		`{"epoch":1,"force":true}`: "force",
		`{"epoch":"1"}`:            "epoch",
	} {
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		status, e := rawCall(t, hs.URL, "POST", "/v1/shards/1/close", b, nil)
		if status != http.StatusBadRequest || e == nil || e.Field != field {
			t.Errorf("body %q: status %d, %+v; want 400 naming %q", body, status, e, field)
		}
	}
	if len(f.calls) != 0 {
		t.Fatalf("refused closes reached the shard manager: %v", f.calls)
	}
	if status, e := rawCall(t, hs.URL, "POST", "/v1/shards/1/close", []byte(`{"force":true}`), nil); status != http.StatusOK {
		t.Fatalf("forced close: %d %+v", status, e)
	}
	ep := m.Shards[1].Epoch
	c := NewClient(hs.URL, "", nil)
	if _, err := c.CloseShard(context.Background(), 1, &ep); err != nil {
		t.Fatalf("fenced close at the current epoch: %v", err)
	}
	if len(f.calls) != 2 {
		t.Fatalf("calls %v; want two closes", f.calls)
	}
}

// An unknown task group in POST /v1/breakers/force is a 400 naming
// task_group and is not stored; Store.ForceBreaker refuses it as well.
func TestForceUnknownTaskGroupRefused(t *testing.T) {
	store := raftstoretest.SingleNode(t, "n1", testShards)
	_, c := newTestServer(t, Config{}, Deps{Store: store, State: store.Reader(), Breakers: noBreakers{}})
	err := c.Do(t.Context(), http.MethodPost, "/v1/breakers/force", nil,
		BreakerForce{TaskGroup: "zz", Namespace: "ns", Destination: "d", Mode: "open"}, nil)
	wantAPIError(t, err, http.StatusBadRequest, CodeInvalidArgument, "task_group")
	_, _, err = store.ForceBreaker(t.Context(), state.ForceBreakerCommand{TaskGroup: "zz", NamespaceID: "ns", Destination: "d", Mode: state.ForceOpen})
	if !errors.Is(err, state.ErrInvalidArgument) || state.AsError(err).Field != "task_group" {
		t.Fatalf("Store.ForceBreaker: %v; want invalid_argument on task_group", err)
	}
	if f := store.Reader().ForcedBreakers(); len(f) != 0 {
		t.Fatalf("stored: %+v", f)
	}
	err = c.Do(t.Context(), http.MethodPost, "/v1/breakers/force", nil,
		BreakerForce{TaskGroup: "callbacks.Invocation", Namespace: "ns", Destination: "d", Mode: "open"}, nil)
	if err != nil {
		t.Fatalf("known task group refused: %v", err)
	}
}

// noBreakers is an empty pool: enough for the force route.
type noBreakers struct{}

func (noBreakers) List() []breakerpool.Status               { return nil }
func (noBreakers) Get(breakerpool.Key) *breakerpool.Breaker { return nil }

// BenchmarkCheckJSONText is the cost on every valid body (the fast path).
func BenchmarkCheckJSONText(b *testing.B) {
	body := []byte(`{"namespace_id":"ns-1","workflow_id":"wf-7","task_group":"callbacks.Invocation",` +
		`"destination":"http://127.0.0.1:9000/cb","request_id":"r-1","request":{"completion":{"state":"succeeded",` +
		`"result":{"data":"` + strings.Repeat("x", 800) + `"}}}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := checkJSONText(body); err != nil {
			b.Fatal(err)
		}
	}
}

// An X-Request-Id longer than the log's bound is refused naming the header
// (it is hashed into the write's dedup id, so the log's own check, which
// named request_id, would never see it).
func TestLongRequestIDHeaderRefused(t *testing.T) {
	store := raftstoretest.SingleNode(t, "n1", testShards)
	s := New(Config{}, Deps{Store: store, State: store.Reader(), Breakers: noBreakers{}}, nil)
	s.taskRoutes(newTaskService(store))
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	body := []byte(`{"namespace_id":"ns","workflow_id":"wf","task_group":"callbacks.Invocation",` +
		`"destination":"http://127.0.0.1:9/cb","request":{"completion":{"state":"succeeded"}}}`)
	status, e := rawCall(t, hs.URL, "POST", "/v1/tasks", body, map[string]string{"X-Request-Id": strings.Repeat("r", state.MaxRequestIDLen+1)})
	if status != http.StatusBadRequest || e == nil || e.Field != "X-Request-Id" {
		t.Fatalf("status %d, error %+v; want 400 naming X-Request-Id", status, e)
	}
	if status, e := rawCall(t, hs.URL, "POST", "/v1/tasks", body, map[string]string{"X-Request-Id": strings.Repeat("r", state.MaxRequestIDLen)}); status != http.StatusAccepted {
		t.Fatalf("an X-Request-Id at the bound: status %d, %+v", status, e)
	}
}
