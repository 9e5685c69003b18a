package hintpolicy

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// BenchmarkDeadDestination counts the calls that reach a dead destination,
// N = 5 nodes each running tasks for the key at a steady 20/s, Timeout 1s,
// for each hint policy. Run with -benchtime=1x (one outage per policy
// takes ~10 s). Metrics:
//
//   - trip-calls: calls from the outage's start until every node is open.
//     All nodes meet the outage at once (each driver at its own random
//     phase): without the early warning each reaches its own threshold
//     before any open hint exists (6N); with it the first node to see 2
//     failures makes every peer guard (probe ≈ 2N+1, adopt ≈ 6+small).
//   - probes/timeout: calls per Timeout during the next 4 s of outage
//     (off: every node probes every timeout; probe/adopt: the owner).
//   - recovery-ms: destination back → every node delivered again.
//   - burst-calls: a second outage that starts with a burst of 20
//     concurrent calls per node; calls until every node is open.
//
// Under confirm a node counts as open once its open state is settled, not
// while it is merely paused for a confirmation round (settledOpen).
func BenchmarkDeadDestination(b *testing.B) {
	for _, pol := range []breakerpool.HintPolicy{breakerpool.HintOff, breakerpool.HintProbe, breakerpool.HintAdopt, breakerpool.HintConfirm} {
		b.Run("policy="+string(pol), func(b *testing.B) { benchDeadDestination(b, pol) })
	}
}

func benchDeadDestination(b *testing.B, pol breakerpool.HintPolicy) {
	const (
		size    = 5
		rate    = 20
		timeout = time.Second
		steady  = 4 * time.Second
		burst   = 20
	)
	dest := transporttest.NewDestination(b)
	nodes := startPCluster(b, size, testSettings(pol, timeout), Config{})
	setURL(dest.CallbackURL(), nodes...)
	client := newClient(b)
	var trip, perTimeout, recovery, burstCalls float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := testKey(fmt.Sprint("bench-", i))
		var drivers []*driver
		for _, n := range nodes {
			drivers = append(drivers, drive(b, n, client, k, rate))
		}
		waitAll(b, "every node to deliver", func(j int) bool { return drivers[j].ok.Load() > 0 }, size)

		down := func() int {
			if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
				b.Fatal(err)
			}
			return dest.Count("")
		}
		start := down()
		waitAll(b, "every node to open", func(j int) bool { return settledOpen(nodes[j], k) }, size)
		opened := dest.Count("")
		trip += float64(opened - start)
		time.Sleep(steady) // measuring a period of outage, not waiting for a condition
		perTimeout += float64(dest.Count("")-opened) / (float64(steady) / float64(timeout))

		recovery += float64(up(b, dest, drivers).Milliseconds())

		// A burst: every node fires 20 calls at once as the outage starts.
		start = down()
		var wg sync.WaitGroup
		for _, n := range nodes {
			for range burst {
				wg.Add(1)
				go func() { defer wg.Done(); _ = n.call(client, k) }()
			}
		}
		wg.Wait()
		waitAll(b, "every node to open after the burst", func(j int) bool { return settledOpen(nodes[j], k) }, size)
		burstCalls += float64(dest.Count("") - start)
		up(b, dest, drivers)
		for _, d := range drivers {
			d.stop()
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(trip/n, "trip-calls")
	b.ReportMetric(perTimeout/n, "probes/timeout")
	b.ReportMetric(recovery/n, "recovery-ms")
	b.ReportMetric(burstCalls/n, "burst-calls")
}

// settledOpen: n's breaker for k is open and not merely paused by a
// pending confirmation round (confirm policy).
func settledOpen(n *pnode, k breakerpool.Key) bool {
	if !isOpen(n, k) {
		return false
	}
	ci, _ := n.pol.Confirmation(k)
	return ci.Outcome != ConfirmPending
}

// up brings the destination back and waits until every driver delivered.
func up(b *testing.B, dest *transporttest.Destination, drivers []*driver) time.Duration {
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		b.Fatal(err)
	}
	back := time.Now()
	waitAll(b, "every node to deliver again", func(j int) bool { return drivers[j].deliveredSince(back) }, len(drivers))
	return time.Since(back)
}

func waitAll(b *testing.B, what string, cond func(j int) bool, n int) {
	testwait.For(b, 30*time.Second, what, func() bool {
		for j := range n {
			if !cond(j) {
				return false
			}
		}
		return true
	})
}

// BenchmarkHintApplied measures, under adopt with N = 5, the delay from a
// local trip on one node until every peer's breaker has opened from the
// hint (transition timestamps, one process, one clock). Run with a fixed
// count, e.g. -benchtime=30x.
func BenchmarkHintApplied(b *testing.B) {
	const size = 5
	// Every iteration trips one more breaker on n0: without a huge minimum
	// it would soon (rightly) suspect its own egress and withhold hints.
	nodes := startPCluster(b, size, testSettings(breakerpool.HintAdopt, time.Minute), Config{SuspectMinOpens: 1 << 30})
	type ev struct {
		key breakerpool.Key
		at  time.Time
	}
	applied := make(chan ev, 1024)
	hook := func(id string, t breakerpool.Transition) {
		if t.Source == breakerpool.SourceHint && t.To == 2 {
			applied <- ev{t.Key, t.At}
		}
	}
	for _, n := range nodes[1:] {
		n.hook.Store(&hook)
	}
	var delays []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := testKey(fmt.Sprint("applied-", i))
		for _, n := range nodes[1:] {
			n.pool.Get(k)
		}
		start := time.Now()
		nodes[0].pool.Get(k).OpenFor(time.Minute, breakerpool.SourceLocal) // a local trip
		last, got := start, 0
		timeout := time.After(5 * time.Second)
		for got < size-1 {
			select {
			case e := <-applied:
				if e.key == k {
					got++
					last = e.at
				}
			case <-timeout:
				b.Fatalf("iteration %d: only %d of %d peers applied the hint", i, got, size-1)
			}
		}
		delays = append(delays, last.Sub(start))
	}
	b.StopTimer()
	slices.Sort(delays)
	q := func(p float64) float64 {
		return float64(delays[min(len(delays)-1, int(p*float64(len(delays))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
