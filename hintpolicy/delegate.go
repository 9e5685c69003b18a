package hintpolicy

import (
	"hash/fnv"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// Calls through a peer (DESIGN.md, "Calls through a peer").
//
// A node whose own egress to one destination is broken (a host firewall, a
// stale trust store, a NAT route of its subnet) fails every call there while
// its peers succeed. Confirm already keeps it from pausing the fleet: a peer
// probes, the probe passes, and the reporter is distrusted for the key. But
// its own tasks for the destination stayed blocked behind its open breaker
// until its egress healed: 1/N of the destination's tasks late by hours.
//
// The evidence that it is this node, not the destination: a peer's call to
// the destination passed (its closed hint, or a call this node made through
// it), and after that this node's own calls tripped its breaker (or failed
// its probe). Then, while its breaker refuses a call, the queue makes it
// through that peer (queue's Delegator, node/delegate.go), and the peer
// calls the destination through its own breaker.
//
// Without fresh evidence a local opening hands one refused call per window
// to a peer (rendezvous over the live peers that do not suspect their own
// egress) as a peer probe: reached, it is the evidence. In a real outage
// the peer's breaker is open too and refuses it without a call, so an
// outage costs each node at most one request to a peer per Timeout per key.
//
// It ends when this node's breaker closes (its own probe passed: its egress
// works again), when the peer reports the key failing or open, when a call
// through it fails at the destination or is refused by its breaker, when
// the peer cannot be reached (then another peer may be probed), or one
// window after the last call through it that reached the destination.

// DelegateResult is what came of a call made through a peer.
type DelegateResult int

// Results of a call through a peer (DelegateOutcome).
const (
	// DelegateReached: the destination answered the peer (any answer: a
	// failure the destination gives is its own, not an egress's).
	DelegateReached DelegateResult = iota
	// DelegateDown: the call failed at the destination for the peer too,
	// or the peer's own breaker refused it: not this node's egress.
	DelegateDown
	// DelegateUnreachable: the peer did not answer or made no call for a
	// reason of its own (an older build, shutting down): says nothing of
	// the destination.
	DelegateUnreachable
)

// delegation is a key's calls-through-a-peer state. Guarded by Policy.mu.
type delegation struct {
	// peerOK is the latest peer whose call to the destination passed, at
	// peerOKAt; cleared by a failure report from a trusted peer.
	peerOK   string
	peerOKAt time.Time
	// via is the peer this node's refused calls go through, until viaUntil.
	via      string
	viaUntil time.Time
	// probeDue: a local opening found no fresh evidence; the next refused
	// call goes to a peer as a peer probe, not before probeAfter (one per
	// window). probing is the peer that has it; avoid is the last peer that
	// could not be reached.
	probeDue   bool
	probeAfter time.Time
	probing    string
	avoid      string
}

// delegateWindows are the key's windows: probe, the spacing of peer
// probes, is its Timeout (its open period: one probe per opening); keep,
// how long a peer's passing call stays evidence and a delegation lasts
// past its last call that reached the destination, is as long as peers
// distrust this node's reports on the key after a refuted one
// (DistrustTimeouts × Timeout): a node's tasks come due seconds apart
// (their backoff), and a delegation that lapsed between two of them
// would cost a peer probe each time. Both at least one Tick.
func (p *Policy) delegateWindows(k breakerpool.Key) (probe, keep time.Duration) {
	probe = p.cfg.Tick
	if b, ok := p.pool.Lookup(k); ok {
		probe = max(probe, b.Settings().Timeout.D())
	}
	return probe, time.Duration(max(p.cfg.DistrustTimeouts, 1)) * probe
}

// delegateHintLocked follows a peer's hint on the key: a closed one from a
// peer that does not suspect itself is evidence that the destination
// answers; a failing, open or half-open one from a peer this node does not
// distrust says it may not, and ends a delegation through that peer.
func (p *Policy) delegateHintLocked(st *keyState, h cluster.Hint, now time.Time) {
	if h.Origin == p.self {
		return
	}
	d := &st.deleg
	if h.State == cluster.HintClosed {
		if !h.Suspect && !p.originSuspect(h.Origin) {
			d.peerOK, d.peerOKAt = h.Origin, now
		}
		return
	}
	if until, ok := st.distrust[h.Origin]; ok && now.Before(until) {
		return // a refuted reporter's word on the key counts for nothing
	}
	d.peerOK = ""
	if d.via == h.Origin {
		p.stopDelegationLocked(h.Key, st, "the peer reports the destination failing")
	}
}

// delegateObserveLocked follows this node's own transitions: a local
// opening (a trip, or a failed probe) with fresh evidence starts a
// delegation through the peer whose call passed (started reports it: the
// caller tells Config.OnDelegate once p.mu is released), and without it
// asks for a peer probe; any close ends both.
func (p *Policy) delegateObserveLocked(t breakerpool.Transition, st *keyState, now time.Time) (started bool) {
	d := &st.deleg
	switch t.To {
	case gobreaker.StateClosed:
		if d.via != "" {
			p.stopDelegationLocked(t.Key, st, "the breaker closed: this node calls the destination itself again")
		}
		*d = delegation{peerOK: d.peerOK, peerOKAt: d.peerOKAt}
	case gobreaker.StateOpen:
		// A Retry-After opening is the destination asking to be left
		// alone, not this node failing: never worked around.
		if t.Source != breakerpool.SourceLocal || !t.RetryUntil.IsZero() || d.via != "" {
			return false
		}
		_, keep := p.delegateWindows(t.Key)
		if d.peerOK == "" || now.Sub(d.peerOKAt) > keep {
			d.peerOK, d.probeDue = "", true
			return false
		}
		p.startDelegationLocked(t.Key, st, d.peerOK, now, keep)
		return true
	}
	return false
}

// startDelegationLocked makes via the peer of st's refused calls.
func (p *Policy) startDelegationLocked(k breakerpool.Key, st *keyState, via string, now time.Time, w time.Duration) {
	d := &st.deleg
	d.via, d.viaUntil, d.probeDue, d.probing = via, now.Add(w), false, ""
	p.met.actions.WithLabelValues(ActionDelegate).Inc()
	p.log.Warn("this node's calls fail where a peer's pass: the calls its open breaker refuses go through that peer",
		"key", k.String(), "via", via)
}

// stopDelegationLocked ends st's delegation, saying why.
func (p *Policy) stopDelegationLocked(k breakerpool.Key, st *keyState, why string) {
	p.log.Info("calls through a peer ended", "key", k.String(), "via", st.deleg.via, "why", why)
	st.deleg.via, st.deleg.viaUntil = "", time.Time{}
}

// DelegateVia returns the peer through which this node should make a call
// for k that its own breaker refused, if any: the peer of a delegation
// that has not expired, or of a peer probe that is due. The peer is alive
// and does not suspect its own egress. Called on the queue's path for
// refused calls only; report each call with DelegateOutcome.
func (p *Policy) DelegateVia(k breakerpool.Key) (string, bool) {
	if !p.running.Load() {
		return "", false
	}
	now := time.Now()
	p.mu.Lock()
	st, ok := p.keys[k]
	if !ok {
		p.mu.Unlock()
		return "", false
	}
	d := &st.deleg
	if d.via != "" && now.After(d.viaUntil) {
		p.stopDelegationLocked(k, st, "no call through the peer reached the destination for DistrustTimeouts × Timeout")
	}
	if via := d.via; via != "" {
		p.mu.Unlock()
		if p.usablePeer(via) {
			return via, true
		}
		// Gone or suspect: end the delegation through it and probe
		// another peer with this call, rather than wait for its window.
		p.mu.Lock()
		if d.via == via {
			p.stopDelegationLocked(k, st, "the peer left, failed or suspects its own egress")
			d.avoid, d.probeDue, d.probeAfter = via, true, time.Time{}
		}
	}
	if !d.probeDue || now.Before(d.probeAfter) {
		p.mu.Unlock()
		return "", false
	}
	avoid := d.avoid
	p.mu.Unlock()
	peer := p.probePeer(k, avoid) // membership reads outside p.mu
	if peer == "" {
		return "", false
	}
	w, _ := p.delegateWindows(k)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !d.probeDue || d.via != "" || now.Before(d.probeAfter) {
		return "", false // another caller took the probe meanwhile
	}
	d.probeDue, d.probing, d.probeAfter = false, peer, now.Add(w)
	return peer, true
}

// Delegating reports whether k's refused calls go through a peer now (a
// delegation that has not expired). Unlike DelegateVia it hands out no
// peer probe.
func (p *Policy) Delegating(k breakerpool.Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.keys[k]
	return ok && st.deleg.via != "" && !time.Now().After(st.deleg.viaUntil)
}

// usablePeer reports whether id is an alive member that does not suspect
// its own egress.
func (p *Policy) usablePeer(id string) bool {
	m, ok := p.members.Member(id)
	return ok && m.State == cluster.StateAlive && !m.Meta.Suspect
}

// probePeer picks the peer of k's peer probe: the rendezvous winner over
// the usable peers other than avoid (and avoid itself if it is the only
// one), "" if there is none.
func (p *Policy) probePeer(k breakerpool.Key, avoid string) string {
	var best, fallback string
	var bestScore uint64
	for _, m := range p.members.Members() {
		if m.ID == p.self || m.State != cluster.StateAlive || m.Meta.Suspect {
			continue
		}
		if m.ID == avoid {
			fallback = m.ID
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(k.String()))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(m.ID))
		if s := h.Sum64(); best == "" || s > bestScore {
			best, bestScore = m.ID, s
		}
	}
	if best == "" {
		return fallback
	}
	return best
}

// DelegateOutcome reports a call made through via for k (DelegateVia's
// answer). A call that reached the destination is fresh evidence: it
// extends the delegation, or starts one after a peer probe (then
// Config.OnDelegate is told). A call that failed at the destination or was
// refused by the peer's breaker ends it and drops the evidence; a peer
// that could not be reached ends it through that peer, and the next
// refused call may probe another.
func (p *Policy) DelegateOutcome(k breakerpool.Key, via string, r DelegateResult) {
	if !p.running.Load() {
		return
	}
	now := time.Now()
	probeW, keep := p.delegateWindows(k)
	started := false
	defer func() { // registered before the unlock's defer: runs after it
		if started && p.cfg.OnDelegate != nil {
			p.cfg.OnDelegate(k)
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.keys[k]
	if !ok {
		return
	}
	d := &st.deleg
	if via != d.via && via != d.probing {
		return // a call handed out before the state moved on
	}
	probe := via == d.probing && d.via == ""
	d.probing = ""
	switch r {
	case DelegateReached:
		d.peerOK, d.peerOKAt, d.avoid = via, now, ""
		st.touched = now
		if probe {
			if st.local == gobreaker.StateClosed {
				return // this node's own breaker closed meanwhile
			}
			p.startDelegationLocked(k, st, via, now, keep)
			started = true
			return
		}
		d.viaUntil = now.Add(keep)
	case DelegateDown:
		d.peerOK = ""
		if !probe {
			p.stopDelegationLocked(k, st, "a call through the peer failed at the destination or was refused by its breaker")
		}
	default:
		// Another peer may be asked soon (not at once: with every peer
		// unreachable, each refused call would otherwise ask one).
		d.avoid, d.probeDue, d.probeAfter = via, true, now.Add(min(probeW, p.cfg.Tick))
		if !probe {
			p.stopDelegationLocked(k, st, "the peer could not be reached")
		}
	}
}
