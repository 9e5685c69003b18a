package api

import (
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
)

// TestToBreakerRetryAfterUntil: the API shows a Retry-After deadline only
// while it is ahead.
func TestToBreakerRetryAfterUntil(t *testing.T) {
	ahead := time.Now().Add(time.Minute)
	b := toBreaker(breakerpool.Status{State: gobreaker.StateOpen, RetryAfterUntil: &ahead})
	if b.RetryAfterUntil == nil || !b.RetryAfterUntil.Equal(ahead) || b.RetryAfterUntil.Location() != time.UTC {
		t.Fatalf("ahead: %v, want %v in UTC", b.RetryAfterUntil, ahead)
	}
	past := time.Now().Add(-time.Second)
	if b := toBreaker(breakerpool.Status{State: gobreaker.StateOpen, RetryAfterUntil: &past}); b.RetryAfterUntil != nil {
		t.Fatalf("past deadline still shown: %v", b.RetryAfterUntil)
	}
}
