package cluster

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"fusebox/breakerpool"
)

type arrival struct {
	key breakerpool.Key
	at  time.Time
}

// BenchmarkHintDelay measures how long a published hint takes to reach every
// peer (the slowest peer's delivery), in one process so clocks agree. Modes:
// "publish" is Publish (direct UDP to every peer + gossip with re-gossip);
// "gossip-only" is the baseline: the stock memberlist broadcast queue, with
// receivers re-queueing as serf does, and no direct send. Fast preset
// (GossipInterval 20ms). Run with a fixed count, e.g. -benchtime=30x.
// N = 50 is issue 17 §3's row: every node's work shares this process's
// cores, so cpu-ms/op (the process's CPU per hint) says what the delay is
// made of; cluster/DESIGN.md, "Where a hint's time goes".
func BenchmarkHintDelay(b *testing.B) {
	for _, n := range []int{3, 5, 9, 50} {
		for _, mode := range []string{"publish", "gossip-only"} {
			b.Run(fmt.Sprintf("N=%d/%s", n, mode), func(b *testing.B) {
				benchHintDelay(b, n, mode == "publish")
			})
		}
	}
}

func benchHintDelay(b *testing.B, n int, direct bool) {
	arrivals := make(chan arrival, 4096)
	observe := func(h Hint, res HintResult) {
		if res != HintApplied {
			return
		}
		select {
		case arrivals <- arrival{h.Key, time.Now()}:
		default:
		}
	}
	nodes := startCluster(b, n, func(c *Config) { c.HintObserver = observe })
	withSinks(nodes)
	var delays []time.Duration
	lost := 0
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := Hint{Key: testKey(fmt.Sprint("bench-", i)), State: HintOpen, Generation: uint64(i + 1), Origin: "n0"}
		start := time.Now()
		if direct {
			if err := nodes[0].Publish(h); err != nil {
				b.Fatal(err)
			}
		} else {
			enc, err := EncodeHint(h)
			if err != nil {
				b.Fatal(err)
			}
			nodes[0].queueHint(h, append([]byte{msgHint}, enc...))
		}
		got, last := 0, start
		timeout := time.NewTimer(5 * time.Second)
	wait:
		for got < n-1 {
			select {
			case a := <-arrivals:
				if a.key == h.Key {
					got++
					last = a.at
				}
			case <-timeout.C:
				lost++
				break wait
			}
		}
		timeout.Stop()
		if got == n-1 {
			delays = append(delays, last.Sub(start))
		}
	}
	b.StopTimer()
	// The whole process's CPU per hint: the fleet's work for it, plus the
	// membership's own traffic meanwhile (which grows with ns/op).
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	if len(delays) > 0 {
		slices.Sort(delays)
		q := func(p float64) float64 {
			return float64(delays[min(len(delays)-1, int(p*float64(len(delays))))].Microseconds()) / 1000
		}
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
	}
	b.ReportMetric(float64(lost), "incomplete")
}

// processCPU is the CPU time (user + system) this process has used: with
// every node in one process, the cost of a hint to the whole fleet.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
