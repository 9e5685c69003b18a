package breakerpool

import (
	"fmt"
	"time"
)

// HintPolicy says what a breaker does with a peer's gossiped hint.
type HintPolicy string

const (
	// HintProbe: an "open" hint makes a closed breaker admit only
	// MaxRequests probe calls until one resolves; a failure opens it.
	HintProbe HintPolicy = "probe"
	// HintAdopt: an "open" hint opens the breaker at once for the hint's
	// remaining open time.
	HintAdopt HintPolicy = "adopt"
	// HintOff: hints are recorded and counted only.
	HintOff HintPolicy = "off"
	// HintConfirm (default): a peer's first failure or trip pauses the
	// breaker briefly while one designated peer probes; if that probe fails too
	// every node opens at once, if it passes nobody does and the first
	// node's verdict on the key is discounted (hintpolicy/DESIGN.md).
	HintConfirm HintPolicy = "confirm"
)

// Defaults, as Temporal ships them (REFERENCE.md) plus fusebox's own.
const (
	DefaultMaxRequests      = 1
	DefaultTimeout          = 60 * time.Second
	DefaultFailureThreshold = 6 // gobreaker's default: trips when consecutive failures exceed 5
	// DefaultMaxRetryAfter caps how long a destination's Retry-After can
	// hold a breaker open (dynconfig fusebox.breaker.maxRetryAfter).
	DefaultMaxRetryAfter = 10 * time.Minute
)

// Settings configure one breaker. The first three fields are Temporal's
// OutboundQueueCircuitBreakerSettings with its zero-value meanings; the rest
// are fusebox's. Settings are values: compare with ==.
type Settings struct {
	// MaxRequests is how many calls half-open admits; MaxRequests consecutive
	// successes close the breaker. 0 means 1.
	MaxRequests uint32 `json:"MaxRequests"`
	// Interval is the closed-state counting period: counts clear every
	// Interval (a rolling window when BucketPeriod > 0). 0 never clears.
	Interval Duration `json:"Interval"`
	// Timeout is how long the breaker stays open before probing. 0 means 60s.
	Timeout Duration `json:"Timeout"`

	// FailureThreshold is the number of consecutive failures that trips the
	// breaker (default 6, i.e. "more than 5"). Must be ≥ 1.
	FailureThreshold uint32 `json:"FailureThreshold"`
	// FailureRate, when > 0, also trips the breaker once at least MinRequests
	// calls were counted in the window and failures/requests ≥ FailureRate.
	// Must be in (0, 1] when set; needs Interval > 0.
	FailureRate float64 `json:"FailureRate,omitempty"`
	// MinRequests is the minimum number of counted calls before FailureRate
	// is considered.
	MinRequests uint32 `json:"MinRequests,omitempty"`
	// BucketPeriod makes Interval a rolling window of Interval/BucketPeriod
	// buckets (gobreaker's BucketPeriod). 0 is a fixed window.
	BucketPeriod Duration `json:"BucketPeriod,omitempty"`
	// Enabled false turns the breaker into a pass-through that still counts.
	Enabled bool `json:"Enabled"`
	// HintPolicy says what this breaker does with peers' gossiped hints. It
	// is configured by its own dynamic-config key (fusebox.breaker.hintPolicy),
	// not inside the circuit breaker settings value, so it has no JSON name.
	HintPolicy HintPolicy `json:"-"`
	// MaxRetryAfter caps how long a 429/503 answer's Retry-After opens the
	// breaker (OpenRetryAfter); 0 ignores Retry-After (such answers count
	// as ordinary failures). Like HintPolicy it has its own dynamic-config
	// key (fusebox.breaker.maxRetryAfter).
	MaxRetryAfter Duration `json:"-"`
}

// DefaultSettings returns the settings a breaker has when config says nothing.
// Decode config JSON on top of this value so omitted fields keep defaults.
func DefaultSettings() Settings {
	return Settings{
		MaxRequests:      DefaultMaxRequests,
		Timeout:          Duration(DefaultTimeout),
		FailureThreshold: DefaultFailureThreshold,
		Enabled:          true,
		HintPolicy:       HintConfirm,
		MaxRetryAfter:    Duration(DefaultMaxRetryAfter),
	}
}

// SettingsError names the invalid field.
type SettingsError struct {
	Field  string
	Reason string
}

func (e *SettingsError) Error() string { return e.Field + ": " + e.Reason }

// Validate rejects settings that cannot be meant, naming the field.
func (s Settings) Validate() error {
	switch {
	case s.Interval < 0:
		return &SettingsError{"Interval", "must not be negative"}
	case s.Timeout < 0:
		return &SettingsError{"Timeout", "must not be negative"}
	case s.BucketPeriod < 0:
		return &SettingsError{"BucketPeriod", "must not be negative"}
	case s.BucketPeriod > 0 && s.Interval == 0:
		return &SettingsError{"BucketPeriod", "needs Interval > 0 (the window it divides)"}
	case s.BucketPeriod > s.Interval:
		return &SettingsError{"BucketPeriod", "must not exceed Interval"}
	case s.FailureThreshold == 0:
		return &SettingsError{"FailureThreshold", "must be at least 1"}
	case s.FailureRate < 0 || s.FailureRate > 1 || s.FailureRate != s.FailureRate:
		return &SettingsError{"FailureRate", fmt.Sprintf("must be in (0, 1], got %v", s.FailureRate)}
	case s.FailureRate > 0 && s.Interval == 0:
		return &SettingsError{"FailureRate", "needs a window: set Interval > 0"}
	case s.FailureRate > 0 && s.MinRequests == 0:
		return &SettingsError{"MinRequests", "must be at least 1 when FailureRate is set"}
	case s.MaxRetryAfter < 0:
		return &SettingsError{"MaxRetryAfter", "must not be negative"}
	}
	switch s.HintPolicy {
	case HintProbe, HintAdopt, HintOff, HintConfirm:
	default:
		return &SettingsError{"HintPolicy", fmt.Sprintf("must be confirm, probe, adopt or off, got %q", s.HintPolicy)}
	}
	return nil
}

// Normalized applies Temporal's zero-value meanings (MaxRequests 0 → 1,
// Timeout 0 → 60s) and fills an empty HintPolicy, so that two settings that
// behave the same compare equal.
func (s Settings) Normalized() Settings {
	if s.MaxRequests == 0 {
		s.MaxRequests = DefaultMaxRequests
	}
	if s.Timeout == 0 {
		s.Timeout = Duration(DefaultTimeout)
	}
	if s.HintPolicy == "" {
		s.HintPolicy = HintConfirm
	}
	return s
}
