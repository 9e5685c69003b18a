package hintpolicy

import (
	"fmt"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/transport/transporttest"
)

// BenchmarkRetryAfterFleet (issue 19 §1): a destination answers every call
// with 429 and `Retry-After: 5`; every node of N runs tasks for the key at
// 20/s. calls-in-window is the number of calls the destination receives in
// the 5 s after the first one. feature=on is the default (maxRetryAfter
// 10m): the first answer's deadline is gossiped and every node holds off
// until it (target ≤ 1). feature=off (maxRetryAfter 0, the baseline, same
// run) classifies the 429 as a plain failure: every node trips on its own
// threshold, helped only by the default probe policy's hints. Run with
// -benchtime=1x.
func BenchmarkRetryAfterFleet(b *testing.B) {
	for _, size := range []int{3, 5} {
		for _, on := range []bool{true, false} {
			name := map[bool]string{true: "on", false: "off"}[on]
			b.Run(fmt.Sprintf("N=%d/feature=%s", size, name), func(b *testing.B) { benchRetryAfter(b, size, on) })
		}
	}
}

func benchRetryAfter(b *testing.B, size int, on bool) {
	const (
		rate   = 20
		window = 5 * time.Second
	)
	s := testSettings(breakerpool.HintProbe, 30*time.Second) // no natural probe inside the window
	if !on {
		s.MaxRetryAfter = 0
	}
	dest := transporttest.NewDestination(b)
	dest.SetRetryAfter("5")
	if err := dest.SetMode(transporttest.ModeTooManyRequests); err != nil {
		b.Fatal(err)
	}
	nodes := startPCluster(b, size, s, Config{})
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(b)
	var calls float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dest.Reset()
		k := testKey(fmt.Sprint("ra-", i))
		var drivers []*driver
		for _, n := range nodes {
			drivers = append(drivers, drive(b, n, client, k, rate))
		}
		waitAll(b, "the first call", func(int) bool { return dest.Count("") > 0 }, 1)
		first := dest.Calls()[0].At
		time.Sleep(time.Until(first.Add(window))) // measuring a period, not waiting for a condition
		for _, d := range drivers {
			d.stop()
		}
		for _, c := range dest.Calls() {
			if c.At.Before(first.Add(window)) {
				calls++
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(calls/float64(b.N), "calls-in-window")
}
