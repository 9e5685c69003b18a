package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Profiles are served only when enabled, and behind the admin token when
// one is set, reads included.
func TestPprofOptInAndGuarded(t *testing.T) {
	get := func(t *testing.T, url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		token   string
		code    int
		content string
	}{
		{"off by default", Config{}, "", http.StatusNotFound, `"not_found"`},
		{"on", Config{EnablePprof: true}, "", http.StatusOK, "goroutine profile: total"},
		{"on, token set, none given", Config{EnablePprof: true, AdminToken: "tok"}, "", http.StatusUnauthorized, CodeUnauthenticated},
		{"on, token set, wrong", Config{EnablePprof: true, AdminToken: "tok"}, "nope", http.StatusUnauthorized, CodeUnauthenticated},
		{"on, token set, given", Config{EnablePprof: true, AdminToken: "tok"}, "tok", http.StatusOK, "goroutine profile: total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := httptest.NewServer(New(tc.cfg, Deps{}, nil).Handler())
			defer hs.Close()
			code, body := get(t, hs.URL+"/debug/pprof/goroutine?debug=1", tc.token)
			if code != tc.code || !strings.Contains(body, tc.content) {
				t.Fatalf("GET /debug/pprof/goroutine: %d %.200q; want %d containing %q", code, body, tc.code, tc.content)
			}
		})
	}
}

// The command line pprof shows (admin only) hides URLs' credentials and
// queries: --postgres-url can carry a password.
func TestRedactArgs(t *testing.T) {
	got := strings.Join(redactArgs([]string{
		"fusebox", "--postgres-url", "postgres://u:s3cret@db:5432/app?sslpassword=s3cret",
		"--postgres-url=postgres://u:s3cret@db/app", "-postgres-url=postgres://db/app?password=s3cret", "--http-addr", "127.0.0.1:8470",
	}), " ")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "db:5432/app") || !strings.Contains(got, "--http-addr 127.0.0.1:8470") {
		t.Errorf("redactArgs = %q", got)
	}
}
