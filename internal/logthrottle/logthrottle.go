// Package logthrottle rate-limits repeated log lines from the libraries
// fusebox embeds. While a cluster has no quorum, raft retries an election
// every second or two and logs the same handful of lines each time (vote
// requests that fail per peer, election timeouts, candidate state), and
// memberlist logs every failed probe: a minute without quorum wrote
// hundreds of identical lines that buried the one that said why. A
// Throttle lets the first few lines of each kind through, then about one
// per interval, and the line that passes says how many like it were
// dropped since the last one shown ("suppressed").
//
// The kind of a line (its key) is built by the caller from the level, the
// message and the attributes that name a thing (a peer, an address), not
// the ones that count (a term, an index): a repeated election at a new
// term is the same kind of line, a vote request to another peer is not.
package logthrottle

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults for the libraries' loggers: three lines of a kind at once, then
// one per 30 s.
const (
	DefaultEvery = 30 * time.Second
	DefaultBurst = 3
	// maxKeys bounds the memory a stream of distinct lines can take; past
	// it, idle kinds are forgotten, and if none is idle lines pass
	// unthrottled (never dropped uncounted).
	maxKeys = 1024
)

// Throttle decides, per kind of line, whether a line is logged. Safe for
// concurrent use.
type Throttle struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu   sync.Mutex
	kind map[string]*kind
}

type kind struct {
	lim        *rate.Limiter
	suppressed int
	last       time.Time
}

// New returns a Throttle letting burst lines of a kind through at once,
// then one per every.
func New(every time.Duration, burst int) *Throttle {
	return &Throttle{every: every, burst: max(burst, 1), now: time.Now, kind: make(map[string]*kind)}
}

// Allow reports whether a line of kind key is logged. When it is,
// suppressed is the number of lines of that kind dropped since the last
// one logged (0 if none), to be written on the line.
func (t *Throttle) Allow(key string) (ok bool, suppressed int) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.kind[key]
	if k == nil {
		if len(t.kind) >= maxKeys && !t.forgetIdle(now) {
			return true, 0
		}
		k = &kind{lim: rate.NewLimiter(rate.Every(t.every), t.burst)}
		t.kind[key] = k
	}
	k.last = now
	if !k.lim.AllowN(now, 1) {
		k.suppressed++
		return false, 0
	}
	s := k.suppressed
	k.suppressed = 0
	return true, s
}

// forgetIdle drops kinds not seen for a whole refill of their burst (their
// limiter is full again, so forgetting them changes nothing but the count
// of lines suppressed long ago, which is lost). It reports whether room
// was made.
func (t *Throttle) forgetIdle(now time.Time) bool {
	idle := t.every * time.Duration(t.burst)
	for key, k := range t.kind {
		if now.Sub(k.last) > idle {
			delete(t.kind, key)
		}
	}
	return len(t.kind) < maxKeys
}
