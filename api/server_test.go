package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fusebox/dynconfig"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// newTestServer serves s.Handler() over a real loopback HTTP server.
func newTestServer(t *testing.T, cfg Config, deps Deps) (*Server, *Client) {
	t.Helper()
	s := New(cfg, deps, nil)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, NewClient(hs.URL, cfg.AdminToken, nil)
}

func TestHealthAndReadiness(t *testing.T) {
	ready := false
	_, c := newTestServer(t, Config{}, Deps{Ready: func() (bool, map[string]any) {
		return ready, map[string]any{"raft_leader": ""}
	}})
	ctx := context.Background()
	if err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil, nil); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	var out map[string]any
	err := c.Do(ctx, http.MethodGet, "/readyz", nil, nil, &out)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz while not ready: %v; want 503", err)
	}
	ready = true
	if err := c.Do(ctx, http.MethodGet, "/readyz", nil, nil, &out); err != nil || out["ready"] != true {
		t.Fatalf("readyz when ready: %v %v", out, err)
	}
}

func TestUnknownRouteIsJSONNotFound(t *testing.T) {
	_, c := newTestServer(t, Config{}, Deps{})
	err := c.Do(context.Background(), http.MethodGet, "/v1/nope", nil, nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNotFound || e.Status != 404 {
		t.Fatalf("err = %#v", err)
	}
}

// Typed errors keep their code and fields across the wire.
func TestMapErrorRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		check  func(*Error) bool
	}{
		{"config validation", &dynconfig.ValidationError{Key: "k", Field: "Timeout", Reason: "must not be negative"}, 400,
			func(e *Error) bool { return e.Code == CodeInvalidArgument && e.Key == "k" && e.Field == "Timeout" }},
		{"unknown key", fmt.Errorf("wrap: %w", dynconfig.ErrUnknownKey), 404,
			func(e *Error) bool { return e.Code == CodeNotFound }},
		{"wrong owner", fmt.Errorf("x: %w", &shardmap.WrongOwnerError{Shard: 7, Owner: "n2", Epoch: 9}), 409,
			func(e *Error) bool {
				return e.Code == CodeWrongOwner && e.Shard != nil && *e.Shard == 7 && e.Owner == "n2" && e.Epoch == 9
			}},
		{"no leader", &state.Error{Code: state.CodeNoLeader, Message: "no leader within 5s"}, 503,
			func(e *Error) bool { return e.Code == CodeNoLeader && e.RetryAfter == 1 }},
		{"raft invalid field", &state.Error{Code: state.CodeInvalidArgument, Field: "url", Message: "bad"}, 400,
			func(e *Error) bool { return e.Field == "url" }},
		{"deadline", context.DeadlineExceeded, 503, func(e *Error) bool { return e.Code == CodeUnavailable }},
		{"bug", errors.New("boom"), 500, func(e *Error) bool { return e.Code == CodeInternal }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{}, Deps{}, nil)
			s.handle("GET /x", needNothing, func(w http.ResponseWriter, r *http.Request) error { return tc.err })
			hs := httptest.NewServer(s.Handler())
			defer hs.Close()
			err := NewClient(hs.URL, "", nil).Do(context.Background(), http.MethodGet, "/x", nil, nil, nil)
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status || !tc.check(e) {
				t.Fatalf("got %#v; want status %d", err, tc.status)
			}
			if tc.status == 503 && e.RetryAfter == 0 {
				t.Fatalf("503 without Retry-After: %#v", e)
			}
		})
	}
}

// A bare AdminToken is a one-admin-token set: no token or an unknown one
// is 401 with WWW-Authenticate, and reads need it too.
func TestAuthWithSingleAdminToken(t *testing.T) {
	s := New(Config{AdminToken: "tok"}, Deps{}, nil)
	s.handle("POST /w", needAdmin, func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(204); return nil })
	s.handle("GET /r", needRead, func(w http.ResponseWriter, r *http.Request) error { w.WriteHeader(204); return nil })
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		token, method, path string
		code                string
	}{
		{"", "POST", "/w", CodeUnauthenticated},
		{"nope", "POST", "/w", CodeUnauthenticated},
		{"tok", "POST", "/w", ""},
		{"", "GET", "/r", CodeUnauthenticated},
		{"tok", "GET", "/r", ""},
		{"", "GET", "/healthz", ""},
	} {
		err := NewClient(hs.URL, tc.token, nil).Do(ctx, tc.method, tc.path, nil, nil, nil)
		var e *Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s %s with %q: %v", tc.method, tc.path, tc.token, err)
		case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code):
			t.Errorf("%s %s with %q: %v; want %s", tc.method, tc.path, tc.token, err, tc.code)
		}
	}
	req, _ := http.NewRequest("POST", hs.URL+"/w", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// Bodies are bounded and strictly decoded; errors name the problem.
func TestReadJSON(t *testing.T) {
	s := New(Config{MaxBodyBytes: 64}, Deps{}, nil)
	s.handle("POST /j", needNothing, func(w http.ResponseWriter, r *http.Request) error {
		var v struct {
			Name  string `json:"name"`
			Count int    `json:"count"`
		}
		if err := s.readJSON(w, r, &v); err != nil {
			return err
		}
		w.WriteHeader(204)
		return nil
	})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{"name":"a","count":1}`, 204, ""},
		{`{"name":"a","colour":1}`, 400, "colour"},
		{`{"count":"x"}`, 400, "count"},
		{`{"name":`, 400, ""},
		{``, 400, ""},
		{`{"name":"a"} {"name":"b"}`, 400, ""},
		{`{"name":"` + strings.Repeat("x", 100) + `"}`, 413, ""},
	} {
		resp, err := http.Post(hs.URL+"/j", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var b [4096]byte
		n, _ := resp.Body.Read(b[:])
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("body %q: status %d, want %d (%s)", tc.body, resp.StatusCode, tc.status, b[:n])
			continue
		}
		if tc.status != 204 {
			e := decodeError(resp.StatusCode, b[:n])
			if e.Field != tc.field {
				t.Errorf("body %q: field %q, want %q (%s)", tc.body, e.Field, tc.field, e.Message)
			}
		}
	}
}

func TestDecodeErrorOfNonJSONBody(t *testing.T) {
	e := decodeError(502, []byte("<html>bad gateway</html>"))
	if e.Code != CodeInternal || e.Status != 502 || !strings.Contains(e.Message, "bad gateway") {
		t.Fatalf("%#v", e)
	}
	if e := decodeError(429, nil); e.Code != CodeOverloaded {
		t.Fatalf("%#v", e)
	}
}

// Responses are compact JSON unless the request asks for ?pretty.
func TestPrettyOnRequest(t *testing.T) {
	s := New(Config{}, Deps{}, nil)
	s.handle("GET /v", needNothing, func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]int{"a": 1})
		return nil
	})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	for path, want := range map[string]string{"/v": "{\"a\":1}\n", "/v?pretty": "{\n  \"a\": 1\n}\n"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("GET %s = %q, want %q", path, b, want)
		}
	}
}
