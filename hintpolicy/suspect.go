package hintpolicy

import (
	"fmt"
	"time"

	"fusebox/breakerpool"
)

// Self-suspicion defaults: a node whose breakers open in a burst (those of
// at least half of the destinations it has breakers for, and of at least 5
// of them, within 30 s) suspects its own egress rather than every
// destination at once.
//
// It counts destinations, not breaker keys: a key is (task group,
// namespace, destination), so one tenant whose dozen namespaces call one
// dead host opened a dozen keys, made the node suspect, and switched off
// its open hints for every other tenant — whose next outage then cost each
// node its own trip (18 calls on 3 nodes instead of 7, the isolation
// review). A node's egress failing fails many hosts, which still counts.
const (
	DefaultSuspectWindow   = 30 * time.Second
	DefaultSuspectMinOpens = 5
	DefaultSuspectRatio    = 0.5
)

// maxSuspectEntries bounds the burst table; a node with more distinct
// destinations opening inside one window than this is suspect anyway.
const maxSuspectEntries = 1 << 14

// suspicion detects a burst of local breaker openings. It is guarded by
// Policy.mu.
type suspicion struct {
	window   time.Duration
	minOpens int
	ratio    float64

	opens  map[string]time.Time // last local closed→open per destination inside the window
	on     bool
	detail string
}

func newSuspicion(window time.Duration, minOpens int, ratio float64) suspicion {
	return suspicion{window: window, minOpens: minOpens, ratio: ratio, opens: make(map[string]time.Time)}
}

// record notes that k's breaker opened locally at now.
func (s *suspicion) record(k breakerpool.Key, now time.Time) {
	d := k.Destination
	if _, ok := s.opens[d]; !ok && len(s.opens) >= maxSuspectEntries {
		s.prune(now)
		if len(s.opens) >= maxSuspectEntries {
			return
		}
	}
	s.opens[d] = now
}

func (s *suspicion) prune(now time.Time) {
	for k, at := range s.opens {
		if now.Sub(at) >= s.window {
			delete(s.opens, k)
		}
	}
}

// evaluate prunes the window and decides against the number of distinct
// destinations the node has breakers for, which destinations reports: a
// walk of the pool, taken only once enough destinations opened to matter.
// It reports whether the verdict changed.
func (s *suspicion) evaluate(now time.Time, destinations func() int) (changed bool) {
	s.prune(now)
	n := len(s.opens)
	on := false
	active := 0
	if n >= s.minOpens {
		active = max(destinations(), n)
		on = float64(n) >= s.ratio*float64(active)
	}
	if on {
		s.detail = fmt.Sprintf("the breakers of %d of %d destinations opened within %v: own egress suspected; open hints withheld", n, active, s.window)
	} else {
		s.detail = ""
	}
	changed = on != s.on
	s.on = on
	return changed
}
