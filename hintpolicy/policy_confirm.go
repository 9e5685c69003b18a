package hintpolicy

import (
	"slices"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// The confirm hint policy (DESIGN.md, "Confirm"). A peer's first report that
// a key is failing (a failing hint at its first failure, or an open hint)
// accuses the destination. Every other node pauses the key (opens it for
// the whole confirmation budget, without a call) except one designated peer:
// the rendezvous winner over the live, non-suspect members other than the
// accuser. It probes with its next real call. If that probe fails, its open
// hint confirms and every node adopts the open state at once; if it
// succeeds, its closed hint refutes: the paused nodes warm-start and close,
// and the accuser's reports on that key are distrusted. A designated peer
// that does not answer within ConfirmWait is replaced by the next one by
// rendezvous, at most ConfirmAttempts times; then the fleet falls back to
// probe (every paused node probes once by itself). A second, independent
// report (another node's failing or open hint, or this node's own failure)
// confirms as well.

// Confirmation outcomes (ConfirmInfo.Outcome).
const (
	ConfirmPending   = "pending"   // waiting for the designated peer
	ConfirmConfirmed = "confirmed" // an independent probe or report failed too: open adopted
	ConfirmRefuted   = "refuted"   // the independent probe passed: nobody adopts, the accuser is distrusted
	ConfirmGaveUp    = "gave_up"   // no designated peer answered: every node probes by itself
)

// confirmation is one confirmation round for a key. Guarded by Policy.mu.
type confirmation struct {
	accused  string    // the node whose report started the round
	tried    []string  // designated peers asked so far, in order
	deadline time.Time // when the current designated peer's answer is due
	started  time.Time
	outcome  string
	by       string    // who confirmed or refuted
	at       time.Time // when the outcome was reached
}

func (c *confirmation) pending() bool { return c != nil && c.outcome == ConfirmPending }

// ConfirmInfo is the confirm policy's view of one key, for the status page
// and the admin API.
type ConfirmInfo struct {
	Outcome    string    `json:"outcome"`
	Accused    string    `json:"accused"`
	Designated string    `json:"designated,omitempty"` // the peer asked last
	By         string    `json:"by,omitempty"`
	At         time.Time `json:"at,omitzero"`
	Distrusted []string  `json:"distrusted,omitempty"` // origins whose reports on the key are ignored
}

// Confirmation returns the latest confirmation round of k, if any.
func (p *Policy) Confirmation(k breakerpool.Key) (ConfirmInfo, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.keys[k]
	if !ok || (st.conf == nil && len(st.distrust) == 0) {
		return ConfirmInfo{}, false
	}
	var ci ConfirmInfo
	if c := st.conf; c != nil {
		ci = ConfirmInfo{Outcome: c.outcome, Accused: c.accused, By: c.by, At: c.at}
		if n := len(c.tried); n > 0 {
			ci.Designated = c.tried[n-1]
		}
	}
	now := time.Now()
	for o, until := range st.distrust {
		if now.Before(until) {
			ci.Distrusted = append(ci.Distrusted, o)
		}
	}
	slices.Sort(ci.Distrusted)
	return ci, true
}

// Confirmations lists every key with a confirmation round or a distrusted
// origin (at most 256, for the status page).
func (p *Policy) Confirmations() map[breakerpool.Key]ConfirmInfo {
	p.mu.Lock()
	keys := make([]breakerpool.Key, 0)
	for k, st := range p.keys {
		if st.conf != nil || len(st.distrust) > 0 {
			keys = append(keys, k)
			if len(keys) == 256 {
				break
			}
		}
	}
	p.mu.Unlock()
	out := make(map[breakerpool.Key]ConfirmInfo, len(keys))
	for _, k := range keys {
		if ci, ok := p.Confirmation(k); ok {
			out[k] = ci
		}
	}
	return out
}

// designateLocked returns the next peer to ask about k: the rendezvous
// winner among the owner candidates (alive, not suspect) other than the
// accused and the peers already tried. "" when none is left.
func (p *Policy) designateLocked(k breakerpool.Key, c *confirmation) string {
	var best string
	var bestScore uint64
	for _, id := range p.owners.Load().ids {
		if id == c.accused || slices.Contains(c.tried, id) {
			continue
		}
		if s := rendezvousScore(k, id); best == "" || s > bestScore || (s == bestScore && id < best) {
			best, bestScore = id, s
		}
	}
	return best
}

// distrustedLocked reports whether origin's reports on the key are ignored,
// and if so extends the distrust (the origin is still reporting).
func (p *Policy) distrustedLocked(st *keyState, origin string, timeout time.Duration, now time.Time) bool {
	until, ok := st.distrust[origin]
	if !ok {
		return false
	}
	if !now.Before(until) {
		delete(st.distrust, origin)
		return false
	}
	st.distrust[origin] = now.Add(p.distrustFor(timeout))
	return true
}

func (p *Policy) distrustFor(timeout time.Duration) time.Duration {
	return time.Duration(p.cfg.DistrustTimeouts) * timeout
}

// maxDistrusted bounds the distrusted origins per key; past it the one that
// expires first is forgotten.
const maxDistrusted = 8

func (p *Policy) distrustLocked(st *keyState, origin string, timeout time.Duration, now time.Time) {
	if st.distrust == nil {
		st.distrust = make(map[string]time.Time)
	}
	if _, ok := st.distrust[origin]; !ok && len(st.distrust) >= maxDistrusted {
		var victim string
		var first time.Time
		for o, u := range st.distrust {
			if victim == "" || u.Before(first) {
				victim, first = o, u
			}
		}
		delete(st.distrust, victim)
	}
	st.distrust[origin] = now.Add(p.distrustFor(timeout))
}

// pauseFor is how long a paused breaker stays open at most: every attempt's
// wait, plus one more so the give-up (not the timer) ends it.
func (p *Policy) pauseFor() time.Duration {
	return time.Duration(p.cfg.ConfirmAttempts+1) * p.cfg.ConfirmWait
}

// applyConfirmLocked applies an open, half-open or failing hint to a
// breaker under confirm and names the action taken.
func (p *Policy) applyConfirmLocked(b *breakerpool.Breaker, h cluster.Hint, st *keyState, now time.Time) string {
	timeout := b.Settings().Timeout.D()
	if p.distrustedLocked(st, h.Origin, timeout, now) {
		return ActionDistrusted
	}
	c := st.conf
	switch {
	case c.pending() && h.Origin != c.accused:
		return p.confirmLocked(b, h, st, h.Origin, now)
	case c.pending():
		return ActionRecorded // the accuser again (its trip after its failing hint)
	}
	s := b.Status()
	if s.State != gobreaker.StateClosed || s.Mode != breakerpool.ModeAuto {
		if h.State == cluster.HintFailing {
			return ActionRecorded
		}
		return p.applyOpenLocked(b, h, st, now) // open here already: the owner's hints extend holds
	}
	c = &confirmation{accused: h.Origin, started: now, outcome: ConfirmPending}
	st.conf = c
	if s.Counts.ConsecutiveFailures > 0 {
		// This node has seen the destination fail too: two independent reports.
		return p.confirmLocked(b, h, st, p.self, now)
	}
	p.confirming[h.Key] = struct{}{}
	select {
	case p.confirmCh <- struct{}{}:
	default: // the loop is already woken
	}
	return p.askLocked(b, h.Key, st, now, true)
}

// askLocked designates the next peer for a pending round: the designated
// node probes, every other node pauses (first: the round just started).
func (p *Policy) askLocked(b *breakerpool.Breaker, k breakerpool.Key, st *keyState, now time.Time, first bool) string {
	c := st.conf
	next := p.designateLocked(k, c)
	if next == "" || len(c.tried) >= p.cfg.ConfirmAttempts {
		return p.giveUpLocked(b, k, st, now)
	}
	c.tried = append(c.tried, next)
	c.deadline = now.Add(p.cfg.ConfirmWait)
	if next == p.self {
		s := b.Status()
		if s.State == gobreaker.StateClosed && s.Mode == breakerpool.ModeAuto {
			b.OpenFor(p.pauseFor(), breakerpool.SourceHint)
		}
		if p.cfg.ConfirmProbe != nil && p.cfg.ConfirmProbe(k) {
			// A health check answers instead of a task (healthprobe).
			p.met.probes.WithLabelValues(ProbeConfirm).Inc()
			return ActionConfirmProbe
		}
		b.ProbeNow(breakerpool.SourceHint) // half-open: the next real call is the probe
		if b.State() == gobreaker.StateHalfOpen {
			p.met.probes.WithLabelValues(ProbeConfirm).Inc()
			st.confirmProbe = true // its half-open transition is not a warm start (Observe)
		}
		return ActionConfirmProbe
	}
	if first {
		b.OpenFor(p.pauseFor(), breakerpool.SourceHint)
		return ActionConfirmPause
	}
	return ActionConfirmRetry
}

// giveUpLocked ends a round nobody answered: a paused breaker probes by
// itself (the probe policy's behaviour).
func (p *Policy) giveUpLocked(b *breakerpool.Breaker, k breakerpool.Key, st *keyState, now time.Time) string {
	c := st.conf
	c.outcome, c.at = ConfirmGaveUp, now
	delete(p.confirming, k)
	if s := b.Status(); s.State == gobreaker.StateOpen && s.Source == breakerpool.SourceHint {
		b.ProbeNow(breakerpool.SourceHint)
	} else if s.State == gobreaker.StateClosed && s.Mode == breakerpool.ModeAuto {
		b.Guard(breakerpool.SourceHint)
	}
	return ActionConfirmGaveUp
}

// confirmLocked ends a round as confirmed by by: the breaker opens (or a
// pause is extended) for the hint's remaining time, capped at this node's
// fallback; the breaker's Timeout when the report carries no open time.
func (p *Policy) confirmLocked(b *breakerpool.Breaker, h cluster.Hint, st *keyState, by string, now time.Time) string {
	c := st.conf
	c.outcome, c.by, c.at = ConfirmConfirmed, by, now
	delete(p.confirming, h.Key)
	timeout := b.Settings().Timeout.D()
	d := timeout
	if h.State == cluster.HintOpen && h.OpenFor > 0 {
		d = min(h.OpenFor, p.fallback(timeout))
	}
	s := b.Status()
	switch {
	case s.State == gobreaker.StateClosed && s.Mode == breakerpool.ModeAuto,
		s.State == gobreaker.StateOpen && s.Source == breakerpool.SourceHint && s.Mode == breakerpool.ModeAuto:
		b.OpenFor(d, breakerpool.SourceHint)
	}
	return ActionConfirmed
}

// refuteLocked ends a pending round as refuted by by (a peer's closed hint,
// or this node's own successful probe): the accuser is distrusted for the
// key. The caller warm-starts a paused breaker.
func (p *Policy) refuteLocked(k breakerpool.Key, st *keyState, by string, timeout time.Duration, now time.Time) {
	c := st.conf
	c.outcome, c.by, c.at = ConfirmRefuted, by, now
	delete(p.confirming, k)
	p.distrustLocked(st, c.accused, timeout, now)
	p.met.actions.WithLabelValues(ActionRefuted).Inc()
	p.log.Info("peer's failure report refuted by an independent probe: distrusting it for the key",
		"key", k.String(), "accused", c.accused, "by", by)
}

// confirmClosedLocked handles a closed hint under confirm: from the accuser
// it clears its distrust (it recovered); from anyone else it refutes a
// pending round. The caller then warm-starts an open breaker.
func (p *Policy) confirmClosedLocked(b *breakerpool.Breaker, h cluster.Hint, st *keyState, now time.Time) {
	delete(st.distrust, h.Origin)
	if c := st.conf; c.pending() {
		if h.Origin == c.accused {
			c.outcome, c.by, c.at = ConfirmRefuted, h.Origin, now // the accuser itself recovered
			delete(p.confirming, h.Key)
			return
		}
		p.refuteLocked(h.Key, st, h.Origin, b.Settings().Timeout.D(), now)
	}
}

// confirmObserveLocked follows this node's own transitions during a round:
// its probe (or any local call) failing confirms, succeeding refutes.
func (p *Policy) confirmObserveLocked(t breakerpool.Transition, st *keyState, timeout time.Duration, now time.Time) {
	if !st.conf.pending() || t.Source != breakerpool.SourceLocal {
		return
	}
	switch t.To {
	case gobreaker.StateOpen:
		st.conf.outcome, st.conf.by, st.conf.at = ConfirmConfirmed, p.self, now
		delete(p.confirming, t.Key)
		p.met.actions.WithLabelValues(ActionConfirmed).Inc()
	case gobreaker.StateClosed:
		p.refuteLocked(t.Key, st, p.self, timeout, now)
	}
}

// confirmTick moves on the rounds whose designated peer did not answer in
// time.
func (p *Policy) confirmTick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.confirming {
		st, ok := p.keys[k]
		if !ok || !st.conf.pending() {
			delete(p.confirming, k)
			continue
		}
		if now.Before(st.conf.deadline) {
			continue
		}
		b, ok := p.pool.Lookup(k)
		if !ok {
			st.conf.outcome, st.conf.at = ConfirmGaveUp, now
			delete(p.confirming, k)
			continue
		}
		p.met.actions.WithLabelValues(p.askLocked(b, k, st, now, false)).Inc()
	}
}
