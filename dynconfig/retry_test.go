package dynconfig

import (
	"testing"
	"time"

	"fusebox/breakerpool"
)

// TestRetryAndDeadlineGetters checks the typed getters of the keys the queue
// and the task API read (issue 20 §6), per task group and constraint.
func TestRetryAndDeadlineGetters(t *testing.T) {
	const (
		nexus = breakerpool.TaskGroupNexusInvocation
		cb    = breakerpool.TaskGroupCallback
	)
	var empty *Snapshot
	if i, m := empty.RetryPolicy(nexus, "ns", "ep"); i != time.Second || m != time.Hour {
		t.Errorf("default Nexus retry policy = %v, %v; want Temporal's 1s, 1h", i, m)
	}
	if n := empty.MaxUnexpectedErrors(); n != 70 {
		t.Errorf("default MaxUnexpectedErrors = %d, want Temporal's 70", n)
	}
	if d := empty.MinRequestTimeout(nexus, "ns"); d != 1500*time.Millisecond {
		t.Errorf("default Nexus MinRequestTimeout = %v, want 1.5s", d)
	}
	if d := empty.MinRequestTimeout(cb, "ns"); d != 0 {
		t.Errorf("callback MinRequestTimeout = %v, want 0 (Temporal has none)", d)
	}
	if d := empty.ScheduleToClose(cb, "ns", "http://h", 0); d != DefaultTaskScheduleToCloseTimeout {
		t.Errorf("default ScheduleToClose = %v, want %v", d, DefaultTaskScheduleToCloseTimeout)
	}

	s, err := NewSnapshot([]Entry{
		{Key: KeyNexusRetryInitialInterval, Value: []byte(`"2s"`)},
		{Key: KeyNexusRetryMaxInterval, Destination: "ep", Value: []byte(`"10s"`)},
		{Key: KeyCallbackRetryInitialInterval, Namespace: "ns", Value: []byte(`"5s"`)},
		{Key: KeyTaskDLQUnexpectedErrorAttempts, Value: []byte(`3`)},
		{Key: KeyNexusMinRequestTimeout, Namespace: "ns", Value: []byte(`"0s"`)},
		{Key: KeyTaskScheduleToCloseTimeout, Value: []byte(`"0s"`)},
		{Key: KeyTaskScheduleToCloseTimeout, Destination: "ep", Value: []byte(`"1h0m0s"`)},
		{Key: KeyNexusMaxScheduleToCloseTimeout, Namespace: "capped", Value: []byte(`"30m0s"`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		group, ns, dest string
		init, max       time.Duration
	}{
		{nexus, "ns", "ep", 2 * time.Second, 10 * time.Second},
		{breakerpool.TaskGroupNexusCancelation, "other", "ep2", 2 * time.Second, time.Hour},
		{cb, "ns", "http://h", 5 * time.Second, time.Hour},
		{cb, "ns2", "http://h", time.Second, time.Hour},
		{"unknown.group", "ns", "ep", time.Second, time.Hour},
	} {
		if i, m := s.RetryPolicy(c.group, c.ns, c.dest); i != c.init || m != c.max {
			t.Errorf("RetryPolicy(%s, %s, %s) = %v, %v; want %v, %v", c.group, c.ns, c.dest, i, m, c.init, c.max)
		}
	}
	if n := s.MaxUnexpectedErrors(); n != 3 {
		t.Errorf("MaxUnexpectedErrors = %d, want 3", n)
	}
	if d := s.MinRequestTimeout(nexus, "ns"); d != 0 {
		t.Errorf("MinRequestTimeout(ns) = %v, want 0", d)
	}
	for _, c := range []struct {
		group, ns, dest string
		req, want       time.Duration
	}{
		{cb, "ns", "http://h", 0, 0},                             // global default: no deadline
		{cb, "ns", "ep", 0, time.Hour},                           // per destination
		{cb, "ns", "http://h", 5 * time.Minute, 5 * time.Minute}, // given wins
		{nexus, "capped", "x", 0, 30 * time.Minute},              // no deadline, capped
		{nexus, "capped", "x", 2 * time.Hour, 30 * time.Minute},  // longer, capped
		{nexus, "capped", "x", time.Minute, time.Minute},         // shorter, kept
		{cb, "capped", "x", 2 * time.Hour, 2 * time.Hour},        // the cap is Nexus only
		{breakerpool.TaskGroupNexusCancelation, "capped", "ep", 0, 30 * time.Minute},
	} {
		if d := s.ScheduleToClose(c.group, c.ns, c.dest, c.req); d != c.want {
			t.Errorf("ScheduleToClose(%s, %s, %s, %v) = %v, want %v", c.group, c.ns, c.dest, c.req, d, c.want)
		}
	}
}
