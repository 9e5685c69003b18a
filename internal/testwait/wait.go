// Package testwait is how every package's tests wait for a condition: one
// helper instead of one per package. Only _test files import it, so no
// binary links it.
package testwait

import (
	"testing"
	"time"
)

// Poll intervals: the first checks come quickly (a state that is about to
// hold is seen within a millisecond or two), then back off to maxPoll. A
// condition that is itself costly (HTTP round trips to several processes,
// a browser evaluation) is polled at most a fifth of the time: the pause
// grows to four times what the last check took, up to maxCostlyPoll.
const (
	firstPoll     = time.Millisecond
	maxPoll       = 10 * time.Millisecond
	maxCostlyPoll = 100 * time.Millisecond
)

// For polls cond until it returns true, and fails the test if timeout
// passes first, naming what it waited for. Tests wait for conditions this
// way, with a generous deadline; they never sleep and hope.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ForErr(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// ForErr is For for a condition that says why it does not hold yet: the
// last reason is in the failure.
func ForErr(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		if err == errNotYet {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
	}
}

// Poll calls cond until it returns nil or timeout passes, and returns its
// last error then (nil when it held). For waits that must not fail the
// test themselves (a harness that retries, a goroutine other than the
// test's).
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	wait := firstPoll
	for {
		start := time.Now()
		err := cond()
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, maxPoll)
		if costly := 4 * time.Since(start); costly > wait {
			wait = min(costly, maxCostlyPoll)
		}
	}
}

type notYet struct{}

func (notYet) Error() string { return "condition not met" }

var errNotYet error = notYet{}
