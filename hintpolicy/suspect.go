package hintpolicy

import (
	"fmt"
	"time"

	"fusebox/breakerpool"
)

// Self-suspicion defaults: a node whose breakers open in a burst (at least
// half of its active breakers and at least 5 of them within 30 s) suspects
// its own egress rather than every destination at once.
const (
	DefaultSuspectWindow   = 30 * time.Second
	DefaultSuspectMinOpens = 5
	DefaultSuspectRatio    = 0.5
)

// maxSuspectEntries bounds the burst table; a node with more distinct keys
// opening inside one window than this is suspect anyway.
const maxSuspectEntries = 1 << 14

// suspicion detects a burst of local breaker openings. It is guarded by
// Policy.mu.
type suspicion struct {
	window   time.Duration
	minOpens int
	ratio    float64

	opens  map[breakerpool.Key]time.Time // last local closed→open per key inside the window
	on     bool
	detail string
}

func newSuspicion(window time.Duration, minOpens int, ratio float64) suspicion {
	return suspicion{window: window, minOpens: minOpens, ratio: ratio, opens: make(map[breakerpool.Key]time.Time)}
}

// record notes that k opened locally at now.
func (s *suspicion) record(k breakerpool.Key, now time.Time) {
	if _, ok := s.opens[k]; !ok && len(s.opens) >= maxSuspectEntries {
		s.prune(now)
		if len(s.opens) >= maxSuspectEntries {
			return
		}
	}
	s.opens[k] = now
}

func (s *suspicion) prune(now time.Time) {
	for k, at := range s.opens {
		if now.Sub(at) >= s.window {
			delete(s.opens, k)
		}
	}
}

// evaluate prunes the window and decides against active, the number of
// breakers in use. It reports whether the verdict changed.
func (s *suspicion) evaluate(now time.Time, active int) (changed bool) {
	s.prune(now)
	n := len(s.opens)
	active = max(active, n)
	on := n >= s.minOpens && active > 0 && float64(n) >= s.ratio*float64(active)
	if on {
		s.detail = fmt.Sprintf("%d of %d active breakers opened within %v: own egress suspected; open hints withheld", n, active, s.window)
	} else {
		s.detail = ""
	}
	changed = on != s.on
	s.on = on
	return changed
}
