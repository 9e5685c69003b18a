package transport

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds a parsed Retry-After before any per-destination cap
// (breakerpool's Settings.MaxRetryAfter, at most 24 h): a larger delta or a
// date further ahead is read as this much, never as an overflow.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads an HTTP Retry-After value (RFC 9110 §10.2.3): either
// delta-seconds (a non-negative decimal integer) or an HTTP date (IMF-fixdate,
// or the obsolete RFC 850 and asctime forms). It returns the absolute
// deadline, at most MaxRetryAfter after now. ok is false for an empty,
// malformed or negative value and for one that asks for no wait (0, or a
// date not after now): such an answer is classified as if it had no
// Retry-After.
func ParseRetryAfter(v string, now time.Time) (until time.Time, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(MaxRetryAfter/time.Second) {
			// Only digits, so the error is a range error: huge means the cap.
			return now.Add(MaxRetryAfter), true
		}
		if secs == 0 {
			return time.Time{}, false
		}
		return now.Add(time.Duration(secs) * time.Second), true
	}
	t, err := http.ParseTime(v)
	if err != nil || !t.After(now) {
		return time.Time{}, false
	}
	if t.Sub(now) > MaxRetryAfter {
		return now.Add(MaxRetryAfter), true
	}
	return t, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// retryAfterFor is the Retry-After deadline of a "down" answer: only a 429
// or a 503 carries one (RFC 9110 gives it meaning there, and on 3xx, which
// are not retried against the same breaker rule).
func retryAfterFor(status int, h http.Header, now time.Time) time.Time {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return time.Time{}
	}
	until, ok := ParseRetryAfter(h.Get("Retry-After"), now)
	if !ok {
		return time.Time{}
	}
	return until
}
