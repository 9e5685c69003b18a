package transport_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		v    string
		ok   bool
		want time.Duration // from now, when ok
	}{
		{"delta", "5", true, 5 * time.Second},
		{"delta spaces", " 120 ", true, 2 * time.Minute},
		{"delta leading zeros", "007", true, 7 * time.Second},
		{"zero", "0", false, 0},
		{"negative", "-5", false, 0},
		{"plus sign", "+5", false, 0},
		{"fraction", "1.5", false, 0},
		{"garbage", "soon", false, 0},
		{"empty", "", false, 0},
		{"unit", "5s", false, 0},
		{"huge delta capped", "999999999", true, transport.MaxRetryAfter},
		{"overflow capped", "99999999999999999999999999", true, transport.MaxRetryAfter},
		{"IMF-fixdate", "Tue, 01 Dec 2026 15:00:30 GMT", true, 30 * time.Second},
		{"RFC 850", "Tuesday, 01-Dec-26 15:01:00 GMT", true, time.Minute},
		{"asctime", "Tue Dec  1 15:00:10 2026", true, 10 * time.Second},
		{"date in the past", "Tue, 01 Dec 2026 14:59:00 GMT", false, 0},
		{"date now", "Tue, 01 Dec 2026 15:00:00 GMT", false, 0},
		{"date far ahead capped", "Fri, 01 Jan 2100 00:00:00 GMT", true, transport.MaxRetryAfter},
		{"bad date", "Tue, 32 Dec 2026 15:00:00 GMT", false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := transport.ParseRetryAfter(c.v, now)
			if ok != c.ok {
				t.Fatalf("ParseRetryAfter(%q) ok = %v, want %v", c.v, ok, c.ok)
			}
			if ok && !got.Equal(now.Add(c.want)) {
				t.Fatalf("ParseRetryAfter(%q) = %v, want now+%v", c.v, got, c.want)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"5", "-1", "Tue, 01 Dec 2026 15:00:30 GMT", "9999999999999999999999", "", " 1 "} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := transport.ParseRetryAfter(v, now)
		if ok && (!got.After(now) || got.Sub(now) > transport.MaxRetryAfter) {
			t.Fatalf("ParseRetryAfter(%q) = %v: outside (now, now+cap]", v, got)
		}
	})
}

// TestRetryAfterClassification: a 429 or 503 with a valid Retry-After is
// down and carries the deadline; without one, or on another status, or
// overridden by nexus-request-retryable: false, it is classified as before.
func TestRetryAfterClassification(t *testing.T) {
	cases := []struct {
		status    int
		ra        string
		retryable string
		down      bool
		carries   bool
	}{
		{429, "5", "", true, true},
		{503, "5", "", true, true},
		{429, "", "", true, false},
		{429, "garbage", "", true, false},
		{429, "-3", "", true, false},
		{500, "5", "", true, false},
		{429, "5", "false", false, false},
	}
	e := newExecutor(t, transport.Options{})
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d/%q/%s", k.name, c.status, c.ra, c.retryable), func(t *testing.T) {
				srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if c.ra != "" {
						w.Header().Set("Retry-After", c.ra)
					}
					if c.retryable != "" {
						w.Header().Set("Nexus-Request-Retryable", c.retryable)
					}
					w.WriteHeader(c.status)
				}))
				before := time.Now()
				res, err := execute(t, e, k.req(srv.URL))
				checkOutcome(t, res, err, c.down, c.status)
				ra := breakerpool.RetryAfterOf(err)
				if ra.IsZero() == c.carries {
					t.Fatalf("RetryAfter = %v, want carried=%v", ra, c.carries)
				}
				if c.carries && (ra.Before(before.Add(5*time.Second)) || ra.After(time.Now().Add(5*time.Second))) {
					t.Fatalf("RetryAfter %v not 5s after the answer", ra)
				}
			})
		}
	}
}
