package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/ui"
)

func serve(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestAssetsContentTypesAndHeaders(t *testing.T) {
	h := ui.New(ui.Deps{}, nil).Page()
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", `<link rel="stylesheet" href="app.css">`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "getJSON('/v1/breakers?scope=cluster')"},
		{"/ui/plots.js", "text/javascript; charset=utf-8", "globalThis.FuseboxPlots"},
		{"/ui/app.css", "text/css; charset=utf-8", ".state-open"},
	} {
		rec := serve(t, h, http.MethodGet, tc.path, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d, want 200", tc.path, rec.Code)
		}
		if got := rec.Header().Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != ui.ContentSecurityPolicy {
			t.Errorf("GET %s: CSP %q", tc.path, got)
		}
		for k, want := range map[string]string{"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"} {
			if got := rec.Header().Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", tc.path, k, got, want)
			}
		}
		if !strings.Contains(rec.Body.String(), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
		etag := rec.Header().Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", tc.path)
		}
		again := serve(t, h, http.MethodGet, tc.path, map[string]string{"If-None-Match": etag})
		if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
			t.Errorf("GET %s with If-None-Match: status %d, %d bytes; want 304, empty", tc.path, again.Code, again.Body.Len())
		}
		head := serve(t, h, http.MethodHead, tc.path, nil)
		if head.Code != http.StatusOK || head.Body.Len() != 0 {
			t.Errorf("HEAD %s: status %d, %d bytes; want 200, empty", tc.path, head.Code, head.Body.Len())
		}
	}
}

func TestCSPIsStrict(t *testing.T) {
	csp := ui.ContentSecurityPolicy
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP lacks %q: %s", want, csp)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*", "data:"} {
		if strings.Contains(csp, bad) {
			t.Errorf("CSP allows %q: %s", bad, csp)
		}
	}
}

// The assets must work offline and under the CSP: no remote URL, no inline
// script or style, and no markup built from strings.
func TestAssetsSelfContained(t *testing.T) {
	h := ui.New(ui.Deps{}, nil).Page()
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/plots.js", "/ui/app.css"} {
		body := serve(t, h, http.MethodGet, path, nil).Body.String()
		for _, bad := range []string{"http://", "https://", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(body, bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
	}
	html := serve(t, h, http.MethodGet, "/ui/", nil).Body.String()
	if strings.Contains(html, "<script>") || strings.Contains(html, "<style") || strings.Contains(html, " style=") {
		t.Errorf("index.html has inline script or style, which the CSP blocks")
	}
}

func TestRoutingErrors(t *testing.T) {
	rec0, _ := ui.NewRecorder(0)
	rec0.Observe(transition("https://hooks.example.com", 1, time.Now()))
	h := ui.New(ui.Deps{NodeID: "n1", Recorder: rec0}, nil)
	page, data := h.Page(), h.Data()

	rec := serve(t, page, http.MethodGet, "/ui", nil)
	if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/ui/" {
		t.Errorf("GET /ui: status %d Location %q, want 301 /ui/", rec.Code, rec.Header().Get("Location"))
	}
	notFound := func(name string, h http.Handler, path string) {
		t.Helper()
		rec := serve(t, h, http.MethodGet, path, nil)
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s GET %s: status %d, want 404: %s", name, path, rec.Code, rec.Body)
			return
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != "not_found" {
			t.Errorf("%s GET %s: body %q is not a not_found error (%v)", name, path, rec.Body.String(), err)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s GET %s: 404 without CSP", name, path)
		}
	}
	for _, path := range []string{"/ui/nope.js", "/ui/assets/app.js", "/ui/app.js/x", "/elsewhere", "/ui/api/other",
		// The page handler is public: it never serves data, whatever the
		// path decodes to (/ui/api%2Ftransitions reaches it as this).
		"/ui/api/transitions", "/ui/api/transitions?scope=cluster", "/ui/api/history", "/ui/api%2Ftransitions", "/ui/api%2fhistory"} {
		notFound("page", page, path)
	}
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/api/other", "/ui/api/transitions/x"} {
		notFound("data", data, path)
	}
	for _, h := range []http.Handler{page, data} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			for _, path := range []string{"/ui/", "/ui/api/transitions"} {
				rec := serve(t, h, m, path, nil)
				if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
					t.Errorf("%s %s: status %d Allow %q, want 405 GET, HEAD", m, path, rec.Code, rec.Header().Get("Allow"))
				}
			}
		}
	}
	rec = serve(t, data, http.MethodGet, "/ui/api/transitions?scope=planet", nil)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "invalid_argument") {
		t.Errorf("bad scope: status %d body %q, want 400 invalid_argument", rec.Code, rec.Body.String())
	}
	// The data answers carry the same security headers as the files.
	rec = serve(t, data, http.MethodGet, "/ui/api/transitions", nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "hooks.example.com") {
		t.Fatalf("data transitions: %d %s", rec.Code, rec.Body)
	}
	for k, want := range map[string]string{"Content-Security-Policy": ui.ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("data transitions: %s %q, want %q", k, got, want)
		}
	}
}

func transition(dest string, gen uint64, at time.Time) breakerpool.Transition {
	return breakerpool.Transition{
		Key:  breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: dest},
		From: 0, To: 2, Source: breakerpool.SourceLocal, Generation: gen, OpenFor: time.Minute, At: at,
	}
}

func TestRecorderBoundedAndOrdered(t *testing.T) {
	rec, err := ui.NewRecorder(5)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	for i := 1; i <= 12; i++ {
		rec.Observe(transition(fmt.Sprintf("d%d", i), uint64(i), base.Add(time.Duration(i)*time.Millisecond)))
		if n := len(rec.Recent()); n != min(i, 5) {
			t.Fatalf("after %d observations Recent has %d, want %d", i, n, min(i, 5))
		}
	}
	got := rec.Recent()
	for i, tr := range got {
		want := uint64(12 - i)
		if tr.Seq != want || tr.Generation != want || tr.Destination != fmt.Sprintf("d%d", want) {
			t.Errorf("Recent[%d] = seq %d gen %d dest %s, want %d (newest first)", i, tr.Seq, tr.Generation, tr.Destination, want)
		}
		if tr.From != "closed" || tr.To != "open" || tr.Source != "local" || tr.OpenForSeconds != 60 {
			t.Errorf("Recent[%d] = %+v: wrong translation", i, tr)
		}
	}
	if rec.Total() != 12 || rec.Capacity() != 5 {
		t.Errorf("Total %d Capacity %d, want 12 and 5", rec.Total(), rec.Capacity())
	}
	// A health check's decision is kept (a failed check is no failed probe).
	checked := transition("d13", 13, base.Add(13*time.Millisecond))
	checked.ByCheck = true
	rec.Observe(checked)
	if tr := rec.Recent()[0]; !tr.ByCheck || got[0].ByCheck {
		t.Errorf("by_check %v after a check's transition, %v before; want true, false", tr.ByCheck, got[0].ByCheck)
	}
	got = rec.Recent()[1:]
	// Recent is a copy.
	got[0].Destination = "changed"
	if rec.Recent()[1].Destination != "d12" {
		t.Error("Recent returned the ring itself")
	}
}

func TestRecorderCapacity(t *testing.T) {
	rec, err := ui.NewRecorder(0)
	if err != nil || rec.Capacity() != ui.DefaultCapacity {
		t.Fatalf("NewRecorder(0) = cap %v, %v; want %d", rec, err, ui.DefaultCapacity)
	}
	for _, c := range []int{-1, ui.MaxCapacity + 1} {
		if _, err := ui.NewRecorder(c); err == nil || !strings.Contains(err.Error(), "capacity") {
			t.Errorf("NewRecorder(%d): err %v, want one naming capacity", c, err)
		}
	}
}

func TestRecorderConcurrent(t *testing.T) {
	rec, _ := ui.NewRecorder(64)
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 500; i++ {
				rec.Observe(transition("d", uint64(i), time.Now()))
				if i%50 == 0 {
					_ = rec.Recent()
				}
			}
		}()
	}
	for w := 0; w < 4; w++ {
		<-done
	}
	got := rec.Recent()
	if rec.Total() != 2000 || len(got) != 64 {
		t.Fatalf("Total %d len %d, want 2000 and 64", rec.Total(), len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq-1 {
			t.Fatalf("Recent not contiguous newest first at %d: %d after %d", i, got[i].Seq, got[i-1].Seq)
		}
	}
}

// A real pool's transitions reach the recorder through its Observer.
func TestRecorderObservesRealPool(t *testing.T) {
	rec, _ := ui.NewRecorder(0)
	pool := startPool(t, rec)
	k := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns1", Destination: "down-api"}
	tripBreaker(t, pool, k)
	testwait.For(t, 5*time.Second, "the trip to be recorded", func() bool { return len(rec.Recent()) == 1 })
	got := rec.Recent()[0]
	if got.TaskGroup != k.TaskGroup || got.Namespace != "ns1" || got.Destination != "down-api" ||
		got.From != "closed" || got.To != "open" || got.Source != "local" || got.OpenForSeconds <= 0 || got.At.IsZero() {
		t.Errorf("recorded %+v", got)
	}

	h := ui.New(ui.Deps{NodeID: "n7", Recorder: rec}, nil).Data()
	resp := serve(t, h, http.MethodGet, "/ui/api/transitions", nil)
	if resp.Code != http.StatusOK || resp.Header().Get("Content-Type") != "application/json" || resp.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("transitions: %d %v", resp.Code, resp.Header())
	}
	var list ui.TransitionList
	if err := json.Unmarshal(resp.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if list.Scope != "local" || list.Node != "n7" || list.Total != 1 || len(list.Transitions) != 1 || list.Transitions[0].Node != "n7" {
		t.Errorf("local list %+v", list)
	}
}

// startPool starts a real breaker pool whose observer is rec.
func startPool(t *testing.T, rec *ui.Recorder) *breakerpool.Pool {
	t.Helper()
	pool, err := breakerpool.New(breakerpool.Config{Observer: rec.Observe}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Start()
	t.Cleanup(pool.Close)
	return pool
}

// tripBreaker fails calls through k's breaker until it opens.
func tripBreaker(t *testing.T, pool *breakerpool.Pool, k breakerpool.Key) {
	t.Helper()
	b := pool.Get(k)
	for i := 0; i < 100; i++ {
		done, err := b.Allow()
		if err != nil {
			return // open
		}
		done(false)
	}
	t.Fatalf("breaker %s did not open after 100 failures", k)
}

// staticMembers is a fixed membership.
type staticMembers []api.Member

func (m staticMembers) Members() []api.Member { return m }
