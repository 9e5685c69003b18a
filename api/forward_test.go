package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/raftstore/raftstoretest"
	"fusebox/raftstore/state"
)

// pathLog records the path of every request a handler serves.
type pathLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *pathLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.paths = append(l.paths, r.URL.Path)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *pathLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.paths
	l.paths = nil
	return out
}

// The forwarder sends a command as the body of /internal/v1/apply/raw,
// request id included; to a leader without that route (an older build,
// 404) it sends JSON to /internal/v1/apply, and keeps doing so for that
// address until the reprobe wait has passed, then tries the raw route
// again.
func TestForwarderSendsRawAndFallsBackToJSON(t *testing.T) {
	store := raftstoretest.SingleNode(t, "n1", testShards)
	s := New(Config{}, Deps{Store: store, State: store.Reader(), Breakers: noBreakers{}}, nil)
	var newLog, oldLog pathLog
	newHS := httptest.NewServer(newLog.wrap(s.Handler()))
	t.Cleanup(newHS.Close)
	oldHS := httptest.NewServer(oldLog.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/v1/apply/raw" { // as an older build's fallback answers it
			writeError(w, Errorf(http.StatusNotFound, CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
			return
		}
		s.Handler().ServeHTTP(w, r)
	})))
	t.Cleanup(oldHS.Close)

	put := func(name string) []byte {
		t.Helper()
		cmd, err := state.EncodeCommand(state.MsgPutEndpoint, state.PutEndpointCommand{
			CommandMeta: state.CommandMeta{At: time.Now()}, Name: name, URL: "http://127.0.0.1:9/nexus"})
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	f := &Forwarder{}
	for _, tc := range []struct {
		hs        *httptest.Server
		log       *pathLog
		name      string
		wantPaths string
	}{
		{newHS, &newLog, "ep-raw", "/internal/v1/apply/raw"},
		{oldHS, &oldLog, "ep-old", "/internal/v1/apply/raw /internal/v1/apply"},
		{oldHS, &oldLog, "ep-old-2", "/internal/v1/apply"}, // remembered
	} {
		reqID := "req-" + tc.name
		res, err := f.ForwardApply(t.Context(), tc.hs.URL, put(tc.name), reqID)
		if err != nil || res.Err != nil || res.Index == 0 {
			t.Fatalf("%s: ForwardApply = %+v, %v", tc.name, res, err)
		}
		if got := strings.Join(tc.log.take(), " "); got != tc.wantPaths {
			t.Fatalf("%s: paths %q, want %q", tc.name, got, tc.wantPaths)
		}
		if _, ok := store.Reader().Endpoint(tc.name); !ok {
			t.Fatalf("%s: not applied", tc.name)
		}
		// The request id travelled: a retry is the same entry, not a new one.
		again, err := f.ForwardApply(t.Context(), tc.hs.URL, put(tc.name), reqID)
		if err != nil || again.Index != res.Index {
			t.Fatalf("%s: retry with the same request id = %+v, %v; want index %d", tc.name, again, err, res.Index)
		}
		tc.log.take()
	}

	// Once reprobe has passed, the raw route is tried again (the leader
	// may have been upgraded in place); a success forgets the 404.
	f.reprobe = time.Nanosecond
	upgraded := &Forwarder{reprobe: time.Nanosecond}
	upgraded.noRaw.Store(newHS.URL, time.Now().Add(-time.Second))
	if _, err := upgraded.ForwardApply(t.Context(), newHS.URL, put("ep-upgraded"), "req-ep-upgraded"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(newLog.take(), " "); got != "/internal/v1/apply/raw" {
		t.Fatalf("after reprobe: paths %q, want the raw route", got)
	}
	if _, still := upgraded.noRaw.Load(newHS.URL); still {
		t.Fatal("a raw success did not forget the earlier 404")
	}
	if _, err := f.ForwardApply(t.Context(), oldHS.URL, put("ep-old-3"), "req-ep-old-3"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(oldLog.take(), " "); got != "/internal/v1/apply/raw /internal/v1/apply" {
		t.Fatalf("old leader after reprobe: paths %q, want raw then JSON", got)
	}

	// The raw route's refusals: an empty body names no field but says so;
	// one over the bound is 413.
	for _, tc := range []struct {
		body   string
		status int
	}{
		{"", http.StatusBadRequest},
		{strings.Repeat("x", MaxForwardBodyBytes+1), http.StatusRequestEntityTooLarge},
	} {
		resp, err := http.Post(newHS.URL+"/internal/v1/apply/raw", "application/octet-stream", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("body of %d bytes: status %d, want %d", len(tc.body), resp.StatusCode, tc.status)
		}
	}
}
