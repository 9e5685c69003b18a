package state

import (
	"net/url"
	"time"
)

// EndpointHealth is a Nexus endpoint's active health check: while the
// endpoint's breaker is open, the key's probe owner calls URL (GET) every
// Interval, each call bounded by Timeout, and a call answered with
// HealthyStatus passes (healthprobe/DESIGN.md). Durations are Go duration
// strings, canonicalised by ValidateEndpointHealth.
type EndpointHealth struct {
	URL           string `json:"url"`
	Interval      string `json:"interval"`
	Timeout       string `json:"timeout"`
	HealthyStatus int    `json:"healthy_status"`
}

// Health-check bounds and defaults.
const (
	HealthMinInterval     = 100 * time.Millisecond
	HealthMaxInterval     = time.Hour
	HealthMinTimeout      = 10 * time.Millisecond
	HealthMaxTimeout      = time.Minute
	HealthDefaultInterval = 10 * time.Second
	HealthDefaultTimeout  = 2 * time.Second
	HealthDefaultStatus   = 200
)

// Durations returns the parsed interval and timeout. A record that
// ValidateEndpointHealth accepted always parses; anything else yields the
// defaults.
func (h EndpointHealth) Durations() (interval, timeout time.Duration) {
	interval, err := time.ParseDuration(h.Interval)
	if err != nil || interval < HealthMinInterval {
		interval = HealthDefaultInterval
	}
	timeout, err = time.ParseDuration(h.Timeout)
	if err != nil || timeout < HealthMinTimeout {
		timeout = HealthDefaultTimeout
	}
	return interval, timeout
}

// ValidateEndpointHealth checks a health check and returns it canonicalised:
// the URL an absolute http(s) URL with a host and no credentials; interval
// 100ms–1h (default 10s); timeout 10ms–1m and at most the interval
// (default 2s, or the interval if shorter); healthy_status 100–599
// (default 200). Errors name the field (health.url, health.interval, …).
// It runs on the proposer only (apply stores what was proposed), so the
// bounds may change without touching old entries. The outbound allowlist is
// the API's check (transport), like the endpoint URL's.
func ValidateEndpointHealth(h EndpointHealth) (EndpointHealth, *Error) {
	if err := ValidateEndpointURL(h.URL); err != nil {
		return h, invalidArg("health.url", "%s", err.Message)
	}
	if u, err := url.Parse(h.URL); err == nil && u.User != nil {
		return h, invalidArg("health.url", "must not carry credentials (user:password@)")
	}
	interval := HealthDefaultInterval
	if h.Interval != "" {
		d, err := time.ParseDuration(h.Interval)
		if err != nil {
			return h, invalidArg("health.interval", "not a duration (e.g. \"10s\"): %q", h.Interval)
		}
		if d < HealthMinInterval || d > HealthMaxInterval {
			return h, invalidArg("health.interval", "must be between %v and %v, got %v", HealthMinInterval, HealthMaxInterval, d)
		}
		interval = d
	}
	timeout := min(HealthDefaultTimeout, interval)
	if h.Timeout != "" {
		d, err := time.ParseDuration(h.Timeout)
		if err != nil {
			return h, invalidArg("health.timeout", "not a duration (e.g. \"2s\"): %q", h.Timeout)
		}
		if d < HealthMinTimeout || d > HealthMaxTimeout {
			return h, invalidArg("health.timeout", "must be between %v and %v, got %v", HealthMinTimeout, HealthMaxTimeout, d)
		}
		if d > interval {
			return h, invalidArg("health.timeout", "must not exceed the interval (%v), got %v", interval, d)
		}
		timeout = d
	}
	status := h.HealthyStatus
	if status == 0 {
		status = HealthDefaultStatus
	}
	if status < 100 || status > 599 {
		return h, invalidArg("health.healthy_status", "must be an HTTP status 100-599, got %d", h.HealthyStatus)
	}
	return EndpointHealth{URL: h.URL, Interval: interval.String(), Timeout: timeout.String(), HealthyStatus: status}, nil
}
