package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/internal/authtoken"
)

type recordDelegate struct {
	mu  sync.Mutex
	got []DelegateRequest
}

var delegateAnswer = DelegateAnswer{Made: true, Outcome: "succeeded", Status: 200, Output: json.RawMessage(`{"x":1}`), Message: "ok"}

func (r *recordDelegate) Delegated(_ context.Context, in DelegateRequest) DelegateAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, in)
	return delegateAnswer
}

// POST /internal/v1/calls/delegate: node (and admin) only; a bad envelope
// field is a 400 naming it; the delegate gets the request as sent and its
// answer comes back.
func TestDelegateRoute(t *testing.T) {
	set, err := authtoken.Parse([]byte("n node node-0123456789abcdef0123456789abcdef\ns submit submit-0123456789abcdef0123456789abcdef\n"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordDelegate{}
	hs := httptest.NewServer(New(Config{Tokens: authtoken.Static(set)}, Deps{Delegate: rec}, nil).Handler())
	t.Cleanup(hs.Close)
	node := NewClient(hs.URL, "node-0123456789abcdef0123456789abcdef", nil)
	submit := NewClient(hs.URL, "submit-0123456789abcdef0123456789abcdef", nil)
	ctx := t.Context()
	good := DelegateRequest{Namespace: "ns", Destination: "ep", Request: json.RawMessage(`{"task_group":"nexus.Invocation","url":"http://x"}`),
		Deadline: time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC), MaxOutput: 10}

	var e *Error
	if _, err := submit.Delegate(ctx, good); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Fatalf("a submit token: %v, want 403", err)
	}
	ans, err := node.Delegate(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ans, delegateAnswer) {
		t.Fatalf("answer %+v, want %+v", ans, delegateAnswer)
	}
	rec.mu.Lock()
	if len(rec.got) != 1 || rec.got[0].Namespace != "ns" || rec.got[0].Destination != "ep" || !rec.got[0].Deadline.Equal(good.Deadline) ||
		rec.got[0].MaxOutput != 10 || string(rec.got[0].Request) != string(good.Request) {
		t.Fatalf("delegate got %+v", rec.got)
	}
	rec.mu.Unlock()

	for _, tc := range []struct {
		in    DelegateRequest
		field string
	}{
		{DelegateRequest{Destination: "ep", Request: good.Request}, "namespace"},
		{DelegateRequest{Namespace: "ns", Request: good.Request}, "destination"},
		{DelegateRequest{Namespace: "ns", Destination: "ep"}, "request"},
		{DelegateRequest{Namespace: "ns", Destination: "ep", Request: good.Request, MaxOutput: -1}, "max_output"},
	} {
		_, err := node.Delegate(ctx, tc.in)
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != tc.field {
			t.Errorf("%+v: %v, want 400 naming %s", tc.in, err, tc.field)
		}
	}
}

// FuzzDelegateRequest: any body is refused, or reaches the delegate with
// its envelope's required fields set.
func FuzzDelegateRequest(f *testing.F) {
	f.Add([]byte(`{"namespace":"ns","destination":"ep","request":{"task_group":"callbacks.Invocation","url":"http://x/cb"}}`))
	f.Add([]byte(`{"namespace":"ns","destination":"ep","request":null}`))
	f.Add([]byte(`{"namespace":"","destination":"ep","request":{},"max_output":-3}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := &recordDelegate{}
		s := New(Config{}, Deps{Delegate: rec}, nil)
		req := httptest.NewRequest(http.MethodPost, "/internal/v1/calls/delegate", strings.NewReader(string(body)))
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.got) != 1 {
				t.Fatalf("accepted %q, delegate called %d times", body, len(rec.got))
			}
			if g := rec.got[0]; g.Namespace == "" || g.Destination == "" || len(g.Request) == 0 || g.MaxOutput < 0 {
				t.Fatalf("accepted %q as %+v", body, g)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("%q: status %d %s", body, w.Code, w.Body.String())
		}
	})
}
