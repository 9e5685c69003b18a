package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A known path with another method is 405 with Allow, not 404; an
// unknown path is still 404.
func TestMethodNotAllowed(t *testing.T) {
	s := New(Config{}, Deps{}, nil)
	s.handle("GET /r/{id}", needNothing, func(w http.ResponseWriter, r *http.Request) error { return nil })
	s.handle("DELETE /r/{id}", needNothing, func(w http.ResponseWriter, r *http.Request) error { return nil })
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"POST", "/r/7", 405, "GET, HEAD, DELETE"},
		{"PUT", "/healthz", 405, "GET, HEAD"},
		{"DELETE", "/metrics", 405, "GET, HEAD"},
		{"POST", "/nope", 404, ""},
		{"GET", "/r/7/extra", 404, ""},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q (%s); want %d Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), b, tc.status, tc.allow)
		}
		if e := decodeError(resp.StatusCode, b); tc.status == 405 && e.Code != CodeMethodNotAllowed {
			t.Errorf("%s %s: code %q", tc.method, tc.path, e.Code)
		}
	}
}

// /metrics needs the read role when tokens are set, unless MetricsPublic.
func TestMetricsAccess(t *testing.T) {
	for _, tc := range []struct {
		cfg    Config
		token  string
		status int
	}{
		{Config{}, "", 200},
		{Config{AdminToken: "tok"}, "", 401},
		{Config{AdminToken: "tok"}, "tok", 200},
		{Config{AdminToken: "tok", MetricsPublic: true}, "", 200},
	} {
		hs := httptest.NewServer(New(tc.cfg, Deps{}, nil).Handler())
		req, _ := http.NewRequest("GET", hs.URL+"/metrics", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		hs.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("metrics public=%v token=%q: %d, want %d", tc.cfg.MetricsPublic, tc.token, resp.StatusCode, tc.status)
		}
	}
}
