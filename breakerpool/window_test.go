package breakerpool

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/internal/testwait"
)

// After a closed Interval ends with no call, every read of the breaker —
// Counts, Status (GET /v1/breakers) and fusebox_breaker_consecutive_failures
// — shows the new, empty window, as gobreaker's State does; the expired
// window's failures do not linger until the next call. Fixed and rolling
// windows alike; with Interval 0 the counts never expire.
func TestCountsShowCurrentWindow(t *testing.T) {
	const interval = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		bucket time.Duration
	}{{"fixed", 0}, {"rolling", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			s.Interval = Duration(interval)
			s.BucketPeriod = Duration(tc.bucket)
			p := newTestPool(t, s, Config{})
			b := p.Get(keyA)
			start := time.Now()
			mustCall(t, b, false)
			mustCall(t, b, false)
			if c := b.Counts(); time.Since(start) < interval/2 && c.ConsecutiveFailures != 2 {
				t.Fatalf("counts inside the window: %+v, want 2 consecutive failures", c)
			}
			// No call from here on: only reads.
			testwait.For(t, 5*time.Second, "the condition", func() bool { return b.Counts() == gobreaker.Counts{} })
			if st := b.Status(); st.Counts != (gobreaker.Counts{}) || st.State != gobreaker.StateClosed {
				t.Fatalf("status after the window: %+v", st)
			}
			const want = `
# HELP fusebox_breaker_consecutive_failures Consecutive failures counted in the current generation.
# TYPE fusebox_breaker_consecutive_failures gauge
fusebox_breaker_consecutive_failures{destination="endpoint-a",namespace="ns1",task_group="nexusoperations.Invocation"} 0
`
			if err := testutil.GatherAndCompare(p.reg, strings.NewReader(want), "fusebox_breaker_consecutive_failures"); err != nil {
				t.Fatal(err)
			}
			// The window that the next call is counted in is that empty one.
			mustCall(t, b, false)
			if c := b.Counts(); c.ConsecutiveFailures != 1 || c.Requests != 1 {
				t.Fatalf("first call of the new window: %+v", c)
			}
		})
	}
}

// With Interval 0 (the default) counts never expire: reads leave them alone.
func TestCountsWithoutIntervalKeep(t *testing.T) {
	p := newTestPool(t, DefaultSettings(), Config{})
	b := p.Get(keyA)
	mustCall(t, b, false)
	mustCall(t, b, false)
	for range 3 {
		if c := b.Counts(); c.ConsecutiveFailures != 2 || b.Status().Counts != c {
			t.Fatalf("counts %+v, status %+v", c, b.Status().Counts)
		}
	}
}
