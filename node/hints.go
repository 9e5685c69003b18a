package node

import (
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/hintpolicy"
)

// hintForwarder carries the pool's transitions to the hint policy. The pool
// is built before the membership (and so before the policy): give the pool
// forwarder.observe as its Observer, then set the policy once it exists.
// Transitions before that (none in practice: nothing calls out before the
// API serves) are dropped.
type hintForwarder struct {
	p atomic.Pointer[hintpolicy.Policy]
}

// observe is the pool's Observer (with the UI recorder) and its OnFailing.
func (f *hintForwarder) observe(t breakerpool.Transition) {
	if p := f.p.Load(); p != nil {
		p.Observe(t)
	}
}

// hintWarnAfter is the early warning's k under probe and adopt: a closed
// breaker that sees this many consecutive failures makes the policy publish
// a "failing" hint so peers guard the destination before their own breakers
// trip (see hintpolicy/DESIGN.md, "Early warning"). The pool reports every
// count from 1 to k (confirm reports at the first failure; the policy
// ignores counts below k for the others). A default in code, not dynamic
// config: 0 would turn the warning off.
const hintWarnAfter = breakerpool.DefaultWarnAfter

// poolConfig is the breaker pool's configuration: observe gets every state
// transition (hint policy and UI); the early warnings go to the hint policy
// only.
func poolConfig(observe func(breakerpool.Transition), fwd *hintForwarder) breakerpool.Config {
	return breakerpool.Config{Observer: observe, WarnAfter: 1, WarnUntil: hintWarnAfter, OnFailing: fwd.observe}
}

// startHints builds the hint policy over the pool and the started
// membership, connects it to the forwarder and starts it: from then on
// local transitions are published and peers' hints applied. Close the
// returned policy before the membership.
func startHints(pool *breakerpool.Pool, members *cluster.Membership, fwd *hintForwarder,
	healthChecked, confirmProbe func(breakerpool.Key) bool, onDelegate func(breakerpool.Key), reg prometheus.Registerer, log *slog.Logger) (*hintpolicy.Policy, error) {
	p, err := hintpolicy.New(hintpolicy.Config{WarnAfter: hintWarnAfter, HealthChecked: healthChecked, ConfirmProbe: confirmProbe, OnDelegate: onDelegate}, pool, members, log, reg)
	if err != nil {
		return nil, err
	}
	fwd.p.Store(p)
	p.Start()
	return p, nil
}

// hintsReadyDetail adds the self-suspicion verdict to the /readyz detail. A
// suspect node stays ready: it still delivers, it only stops telling peers.
func hintsReadyDetail(p *hintpolicy.Policy, detail map[string]any) {
	if p == nil {
		return
	}
	suspect, why := p.Suspect()
	detail["egress_suspect"] = suspect
	if suspect {
		detail["egress_suspect_detail"] = why
	}
}

// confirmAPI adapts the hint policy's confirmation rounds to the API's
// breaker list.
type confirmAPI struct{ p *hintpolicy.Policy }

func (c confirmAPI) ConfirmOf(k breakerpool.Key) (api.BreakerConfirm, bool) {
	if c.p == nil {
		return api.BreakerConfirm{}, false
	}
	ci, ok := c.p.Confirmation(k)
	if !ok {
		return api.BreakerConfirm{}, false
	}
	return api.BreakerConfirm{Outcome: ci.Outcome, Accused: ci.Accused, Designated: ci.Designated,
		By: ci.By, At: ci.At, Distrusted: ci.Distrusted}, true
}
