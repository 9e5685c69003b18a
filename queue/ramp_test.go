package queue_test

import (
	"math"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/queue"
	"fusebox/queue/queuetest"
)

func TestRampRate(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		start, target float64
		d, elapsed    time.Duration
		want          float64
		done          bool
	}{
		{10, 100, 10 * s, 0, 10, false},
		{10, 100, 10 * s, 999 * time.Millisecond, 10, false}, // the whole first second at the start rate
		{10, 100, 10 * s, s, 19, false},
		{10, 100, 10 * s, 9500 * time.Millisecond, 91, false},
		{10, 100, 10 * s, 10 * s, 100, true},
		{10, 100, 2500 * time.Millisecond, 2 * s, 70, false}, // 3 stages: 10, 40, 70
		{10, 100, 0, 0, 100, true},                           // off
		{200, 100, 10 * s, 0, 100, true},                     // start above target: no ramp
		{10, math.Inf(1), 10 * s, 0, 10, false},
		{10, math.Inf(1), 10 * s, s, math.Inf(1), true},
		{10, 100, 10 * s, -s, 100, true}, // clock went back: end it rather than hold it
	} {
		got, done := queue.RampRate(tc.start, tc.target, tc.d, tc.elapsed)
		if math.Abs(got-tc.want) > 1e-9 && got != tc.want || done != tc.done {
			t.Errorf("rampRate(%v, %v, %v, %v) = %v, %v; want %v, %v", tc.start, tc.target, tc.d, tc.elapsed, got, done, tc.want, tc.done)
		}
	}
}

// Issue 19 §2: after a close the key's released backlog starts at the ramp's
// start rate with no saved-up burst (the destination sees at most
// rampStartRPS calls in the first second), then the rate climbs back to
// the configured one and the ramp ends.
func TestRampAfterClose(t *testing.T) {
	const n, start = 40, 5
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 100 // burst 100: without the ramp all 40 would go at once
	lim.RampStartRPS, lim.RampDuration = start, 2*time.Second
	e := newEnv(t, 2, lim)
	tasks := blockedTasks(n, 2, "dead", "dest")
	e.add(t, tasks...)
	exec := newFakeExec(false)
	q := e.start(t, fastCfg(), exec, nil)
	testwait.For(t, 5*time.Second, "the shards to start", func() bool {
		_, ok0 := q.ShardState(0)
		_, ok1 := q.ShardState(1)
		return ok0 && ok1
	})
	if _, ok := q.Ramp(key("dest")); ok {
		t.Fatal("ramping before any close")
	}

	closed := time.Now()
	q.KeyClosed(key("dest"))
	st, ok := q.Ramp(key("dest"))
	if !ok || st.StartRPS != start || st.Until.Sub(st.Since) != 2*time.Second || st.TargetRPS != 100 {
		t.Fatalf("Ramp after close = %+v, %v; want start %v over 2s towards 100", st, ok, start)
	}
	if got := metric(t, e.reg, "fusebox_queue_recovery_ramps_started_total", nil); got != 1 {
		t.Fatalf("ramps started = %v, want 1", got)
	}
	if got := metric(t, e.reg, "fusebox_queue_recovery_ramps", nil); got != 1 {
		t.Fatalf("ramps under way = %v, want 1", got)
	}
	testwait.For(t, 10*time.Second, "every released task delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	first := 0
	for _, at := range exec.callTimes() {
		if at.Sub(closed) < time.Second {
			first++
		}
	}
	if first > start {
		t.Fatalf("%d calls in the first second after the close; the ramp allows %d", first, start)
	}
	testwait.For(t, 5*time.Second, "the ramp to end", func() bool {
		_, ok := q.Ramp(key("dest"))
		return !ok && metric(t, e.reg, "fusebox_queue_recovery_ramps", nil) == 0
	})
	testwait.For(t, 5*time.Second, "the configured rate back", func() bool {
		l, b, ok := q.GroupRate(key("dest"))
		return !ok || (l == 100 && b == 100)
	})
}

// A close that races the ramp loop's tick (the tick's time is before the
// ramp's start) keeps its ramp: it used to read as a ramp from the future
// and be forgotten, so the key went back to its full rate at once.
func TestRampSurvivesAStaleTick(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.RampStartRPS, lim.RampDuration = 5, time.Hour
	e := newEnv(t, 1, lim)
	q := e.start(t, fastCfg(), newFakeExec(false), nil)
	testwait.For(t, 5*time.Second, "the shard to start", func() bool { _, ok := q.ShardState(0); return ok })
	tick := time.Now() // the tick fired, then the close came before retune ran
	q.KeyClosed(key("dest"))
	q.RetuneAt(tick)
	if st, ok := q.Ramp(key("dest")); !ok || st.StartRPS != 5 {
		t.Fatalf("Ramp after a tick older than the close = %+v, %v; want the ramp under way", st, ok)
	}
}

// With rampDuration 0 a close changes nothing about the rate.
func TestNoRampWhenOff(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.RampStartRPS = 5
	e := newEnv(t, 1, lim)
	tasks := blockedTasks(3, 1, "dead", "dest")
	e.add(t, tasks...)
	q := e.start(t, fastCfg(), newFakeExec(false), nil)
	testwait.For(t, 5*time.Second, "the shard to start", func() bool { _, ok := q.ShardState(0); return ok })
	q.KeyClosed(key("dest"))
	if st, ok := q.Ramp(key("dest")); ok {
		t.Fatalf("ramping with rampDuration 0: %+v", st)
	}
	testwait.For(t, 10*time.Second, "delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if l, _, ok := q.GroupRate(key("dest")); ok && l != 100 {
		t.Fatalf("rate %v after a close with the ramp off, want 100", l)
	}
}

// A breaker that opens arms the ramp: the key's limiter drops to the start
// rate with burst 1 at once, so the calls a close lets through before
// KeyClosed arrives (the pool's observer is asynchronous) find no burst
// saved up. The ramp itself (its stages, Ramp) begins at the close.
func TestRampArmedWhileOpen(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 100
	lim.RampStartRPS, lim.RampDuration = 5, 2*time.Second
	e := newEnv(t, 1, lim)
	tasks := callbacks(3, 1, "warm", "dest")
	e.add(t, tasks...)
	q := e.start(t, fastCfg(), newFakeExec(false), nil)
	testwait.For(t, 10*time.Second, "delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if l, b, ok := q.GroupRate(key("dest")); ok && (l != 100 || b != 100) {
		t.Fatalf("rate %v burst %v before any outage, want 100, 100", l, b)
	}

	q.KeyOpened(key("dest"))
	if l, b, ok := q.GroupRate(key("dest")); ok && (l != 5 || b != 1) {
		t.Fatalf("armed: rate %v burst %v, want 5, 1", l, b)
	}
	if _, ok := q.Ramp(key("dest")); ok {
		t.Fatal("an armed ramp is reported as under way")
	}
	if got := metric(t, e.reg, "fusebox_queue_recovery_ramps", nil); got != 0 {
		t.Fatalf("ramps under way while armed = %v, want 0", got)
	}
	q.KeyClosed(key("dest"))
	if st, ok := q.Ramp(key("dest")); !ok || st.StartRPS != 5 {
		t.Fatalf("after the close: %+v, %v; want a ramp from 5", st, ok)
	}
	testwait.For(t, 5*time.Second, "the configured rate back", func() bool {
		l, b, ok := q.GroupRate(key("dest"))
		return !ok || (l == 100 && b == 100)
	})
}

// A breaker that opened only for a confirmation round nobody confirmed
// (KeyClosedWithoutRamp) closes without a ramp: the ramp its opening armed
// is dropped, the configured rate is back at once, and its blocked tasks
// are released as at any close.
func TestNoRampAfterARefutedCheck(t *testing.T) {
	lim := queuetest.DefaultLimits()
	lim.MaxTaskRPS = 100
	lim.RampStartRPS, lim.RampDuration = 5, time.Hour
	e := newEnv(t, 1, lim)
	warm := callbacks(3, 1, "warm", "dest") // the key's group exists
	e.add(t, warm...)
	q := e.start(t, fastCfg(), newFakeExec(false), nil)
	testwait.For(t, 10*time.Second, "delivered", func() bool { return e.allStatus(warm, queue.StatusSucceeded) })
	tasks := blockedTasks(3, 1, "paused", "dest")
	e.add(t, tasks...)
	q.KeyOpened(key("dest"))
	if l, b, ok := q.GroupRate(key("dest")); !ok || l != 5 || b != 1 {
		t.Fatalf("armed: rate %v burst %v (group %v), want 5, 1", l, b, ok)
	}
	q.KeyClosedWithoutRamp(key("dest"))
	if st, ok := q.Ramp(key("dest")); ok {
		t.Fatalf("ramping after a refuted check: %+v", st)
	}
	if l, b, ok := q.GroupRate(key("dest")); !ok || l != 100 || b != 100 {
		t.Fatalf("rate %v burst %v (group %v) after a refuted check, want the configured 100, 100 at once", l, b, ok)
	}
	testwait.For(t, 10*time.Second, "the blocked tasks released and delivered", func() bool { return e.allStatus(tasks, queue.StatusSucceeded) })
	if got := metric(t, e.reg, "fusebox_queue_recovery_ramps_started_total", nil); got != 0 {
		t.Fatalf("ramps started = %v, want 0", got)
	}
}
