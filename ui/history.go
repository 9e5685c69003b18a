package ui

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/transport"
)

// History defaults: a sample every 2 s (the page's refresh), kept 5 min.
const (
	DefaultSampleEvery = 2 * time.Second
	DefaultHistorySpan = 5 * time.Minute
	// MaxHistorySamples bounds a History's ring, and how many samples are
	// taken from one peer when the cluster history is merged.
	MaxHistorySamples = 600
	// MaxSampleKeys bounds the breaker keys of one sample: the busiest by
	// calls in the interval.
	MaxSampleKeys = 20
)

// requestsMetric is the breaker pool's per-key call counter
// (breakerpool/metrics.go): outcome success, failure or rejected.
const requestsMetric = "fusebox_breaker_requests_total"

// KeyCalls is one breaker key's calls on one node during one sample
// interval: Calls reached the destination (success or failure), Failures
// of them were destination-down results, Rejected were refused by the
// breaker.
type KeyCalls struct {
	TaskGroup   string `json:"task_group"`
	Namespace   string `json:"namespace"`
	Destination string `json:"destination"`
	Calls       uint64 `json:"calls"`
	Failures    uint64 `json:"failures"`
	Rejected    uint64 `json:"rejected"`
}

// Sample is one interval of a node's history, ending At: the keys that
// saw calls or rejections in it, and the shard map's owners as this node's
// replica held it at that moment.
type Sample struct {
	At     time.Time      `json:"at"`
	Calls  []KeyCalls     `json:"calls,omitempty"`
	Shards map[string]int `json:"shards,omitempty"`
}

type callKey struct{ tg, ns, dest string }

type callTotals struct{ success, failure, rejected uint64 }

// History is a node's recent past for the status page's plots: every
// interval it reads the breaker pool's call counters from the registry
// (fusebox_breaker_requests_total, the same series /metrics shows) and the
// shard owners, and keeps the differences in a fixed ring. Memory is
// bounded by the ring and MaxSampleKeys; Run is its only goroutine, owned
// by the node and stopped by its context.
type History struct {
	gather prometheus.Gatherer
	shards func() map[string]int
	every  time.Duration

	mu   sync.Mutex
	ring []Sample
	next int
	prev map[callKey]callTotals // the counters at the last sample
}

// NewHistory samples every `every` (0: DefaultSampleEvery) and keeps
// span's worth (0: DefaultHistorySpan), at most MaxHistorySamples. gather
// is the node's registry and shards its shard owners now (node id →
// shards owned); either may be nil.
func NewHistory(gather prometheus.Gatherer, shards func() map[string]int, every, span time.Duration) (*History, error) {
	if every == 0 {
		every = DefaultSampleEvery
	}
	if span == 0 {
		span = DefaultHistorySpan
	}
	n := int(span / every)
	if every < 0 || n < 2 || n > MaxHistorySamples {
		return nil, fmt.Errorf("ui: history: %v every %v is %d samples; want 2..%d", span, every, n, MaxHistorySamples)
	}
	return &History{gather: gather, shards: shards, every: every, ring: make([]Sample, 0, n), prev: map[callKey]callTotals{}}, nil
}

// Every is the sample interval.
func (h *History) Every() time.Duration { return h.every }

// Run samples until ctx ends.
func (h *History) Run(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	h.sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.sample(now)
		}
	}
}

// Samples returns the ring, oldest first (a copy).
func (h *History) Samples() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) < cap(h.ring) { // not wrapped yet
		return slices.Clone(h.ring)
	}
	return append(slices.Clone(h.ring[h.next:]), h.ring[:h.next]...)
}

func (h *History) sample(now time.Time) {
	s := Sample{At: now.UTC()}
	cur := h.readCalls()
	if h.shards != nil {
		s.Shards = h.shards()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, c := range cur {
		p := h.prev[k]
		d := callTotals{delta(c.success, p.success), delta(c.failure, p.failure), delta(c.rejected, p.rejected)}
		if d.success+d.failure+d.rejected == 0 {
			continue
		}
		s.Calls = append(s.Calls, KeyCalls{TaskGroup: k.tg, Namespace: k.ns, Destination: k.dest,
			Calls: d.success + d.failure, Failures: d.failure, Rejected: d.rejected})
	}
	h.prev = cur // keys gone from the registry are forgotten: a new breaker counts from zero
	s.Calls = busiest(s.Calls)
	if len(h.ring) < cap(h.ring) {
		h.ring = append(h.ring, s)
	} else {
		h.ring[h.next] = s
	}
	h.next = (h.next + 1) % cap(h.ring)
}

// delta is a counter's increase; a counter that went down restarted from
// zero (an evicted breaker created again).
func delta(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// readCalls reads every key's cumulative counters from the registry.
func (h *History) readCalls() map[callKey]callTotals {
	out := map[callKey]callTotals{}
	if h.gather == nil {
		return out
	}
	mfs, _ := h.gather.Gather() // a partial gather still has the pool's series
	for _, mf := range mfs {
		if mf.GetName() != requestsMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k callKey
			var outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "task_group":
					k.tg = l.GetValue()
				case "namespace":
					k.ns = l.GetValue()
				case "destination":
					k.dest = transport.RedactURL(l.GetValue())
				case "outcome":
					outcome = l.GetValue()
				}
			}
			c := out[k]
			v := uint64(m.GetCounter().GetValue())
			switch outcome {
			case "success":
				c.success += v
			case "failure":
				c.failure += v
			case "rejected":
				c.rejected += v
			}
			out[k] = c
		}
	}
	return out
}

// busiest orders keys by calls plus rejections (then by key) and keeps
// MaxSampleKeys.
func busiest(keys []KeyCalls) []KeyCalls {
	slices.SortFunc(keys, func(a, b KeyCalls) int {
		if c := cmp.Compare(b.Calls+b.Rejected, a.Calls+a.Rejected); c != 0 {
			return c
		}
		return cmp.Compare(a.TaskGroup+"/"+a.Namespace+"/"+a.Destination, b.TaskGroup+"/"+b.Namespace+"/"+b.Destination)
	})
	if len(keys) > MaxSampleKeys {
		keys = keys[:MaxSampleKeys]
	}
	return keys
}
