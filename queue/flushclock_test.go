package queue

import (
	"testing"
	"time"
)

// Every shard that waits during one interval gets the same tick, so their
// writes go out together; the next waiter after the tick starts a new one.
func TestFlushClockSharesOneTick(t *testing.T) {
	c := newFlushClock(20 * time.Millisecond)
	defer c.close()
	first := c.next()
	if second := c.next(); second != first {
		t.Fatal("two waiters in one interval got different ticks")
	}
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the tick never came")
	}
	third := c.next()
	if third == first {
		t.Fatal("a waiter after the tick got the tick that had passed")
	}
	select {
	case <-third:
	case <-time.After(10 * time.Second):
		t.Fatal("the next tick never came")
	}
}

// After close no tick is pending or started: flushers leave by their own
// stop channels, and no timer outlives the queue.
func TestFlushClockClose(t *testing.T) {
	c := newFlushClock(time.Hour)
	pending := c.next()
	c.close()
	if c.timer != nil && c.timer.Stop() {
		t.Fatal("close left the pending tick's timer running")
	}
	if got := c.next(); got != pending {
		t.Fatal("next after close started a new tick")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil && c.tick != pending {
		t.Fatal("a timer was started after close")
	}
}
