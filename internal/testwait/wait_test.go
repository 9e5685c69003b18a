package testwait

import (
	"errors"
	"testing"
	"time"
)

func TestPollReturnsWhenTheConditionHolds(t *testing.T) {
	calls := 0
	err := Poll(5*time.Second, func() error {
		if calls++; calls < 5 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 5 {
		t.Fatalf("Poll = %v after %d calls, want nil after 5", err, calls)
	}
}

func TestPollGivesTheLastReasonAtTheDeadline(t *testing.T) {
	n := 0
	err := Poll(20*time.Millisecond, func() error {
		n++
		return errors.New("still down")
	})
	if err == nil || err.Error() != "still down" || n < 2 {
		t.Fatalf("Poll = %v after %d calls, want the condition's last error after several calls", err, n)
	}
}

// A condition that costs time is not spun on: the pause grows to four
// times its cost. (Load only makes the count smaller.)
func TestPollBacksOffForACostlyCondition(t *testing.T) {
	n := 0
	_ = Poll(300*time.Millisecond, func() error {
		n++
		time.Sleep(10 * time.Millisecond)
		return errors.New("no")
	})
	// Back to back it would run about 30 times; with 40 ms pauses about 6.
	if n > 15 {
		t.Fatalf("a 10 ms condition ran %d times in 300 ms", n)
	}
}
