package hintpolicy

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/cluster"
)

// Policy defaults. See Config.
const (
	DefaultFallbackFactor  = 2.0
	DefaultFallbackJitter  = 0.5
	DefaultMaxHoldTimeouts = 8
	DefaultMaxPrecreated   = 1024
	DefaultMaxKeys         = 1 << 16
	DefaultKeyIdleTTL      = 5 * time.Minute
	DefaultPolicyTick      = time.Second
	// Confirm policy: how long a designated peer has to answer, how many
	// are asked in turn, and how long (in Timeouts) a refuted reporter's
	// verdict on the key is ignored after its last report.
	DefaultConfirmWait      = 500 * time.Millisecond
	DefaultConfirmAttempts  = 3
	DefaultDistrustTimeouts = 10
)

// Config tunes the hint policy. The zero value of every field means
// its default.
type Config struct {
	// FallbackFactor and FallbackJitter set how long a breaker that does not
	// own its key's probe stays open before probing by itself:
	// Timeout × [FallbackFactor, FallbackFactor+FallbackJitter), drawn per
	// opening. Defaults 2 and 0.5.
	FallbackFactor float64
	FallbackJitter float64
	// MaxHoldTimeouts bounds how far the probe owner's repeated "open" hints
	// can extend a non-owner's open period: never past its first fallback
	// deadline plus MaxHoldTimeouts × Timeout. Default 8.
	MaxHoldTimeouts int
	// MaxPrecreated bounds the breakers that peers' open hints may create
	// for keys this node has not used. Default 1024.
	MaxPrecreated int
	// MaxKeys bounds the per-key policy state (Lamport clocks, last
	// publication). Default 65536.
	MaxKeys int
	// KeyIdleTTL is how long a closed key's state is kept after its last
	// hint or transition. Default 5m.
	KeyIdleTTL time.Duration
	// SuspectWindow, SuspectMinOpens and SuspectRatio define a burst: at
	// least SuspectMinOpens local breakers, and at least SuspectRatio of the
	// active ones, opened within SuspectWindow. Defaults 30s, 5, 0.5.
	SuspectWindow   time.Duration
	SuspectMinOpens int
	SuspectRatio    float64
	// Tick is the period of the maintenance pass (suspicion window, key GC,
	// precreate slots). Default 1s.
	Tick time.Duration
	// WarnAfter is the early warning's k under probe and adopt: failing
	// events (breakerpool KindFailing) below it are ignored for those keys;
	// confirm acts on the first failure. Default breakerpool.DefaultWarnAfter.
	// The pool must report counts 1..WarnAfter (Config.WarnAfter 1,
	// WarnUntil ≥ this) for confirm to see first failures.
	WarnAfter int
	// HealthChecked, optional, reports whether a key has an active health
	// check (healthprobe): a node that takes over a key's probe ownership
	// then leaves the first probe to the health check instead of
	// warm-starting the breaker with a real call.
	HealthChecked func(breakerpool.Key) bool
	// ConfirmProbe, optional, is the designated peer's probe under confirm
	// for a key with a health check (healthprobe.Prober.CheckNow): a health
	// call instead of a real task, whose verdict moves the breaker as a
	// probe's would. False: no health check, the breaker probes with a task.
	ConfirmProbe func(breakerpool.Key) bool
	// ConfirmWait is how long a designated peer has to answer (probe) under
	// confirm before the next is asked; ConfirmAttempts bounds how many are
	// asked; DistrustTimeouts is how long, in the key's Timeouts after its
	// last report, a refuted reporter is ignored. Defaults 500ms, 3, 10.
	ConfirmWait      time.Duration
	ConfirmAttempts  int
	DistrustTimeouts int
	// OnDelegate, optional, is told (with no lock of the policy held, on
	// the pool observer's goroutine: it must not block) when this node's
	// calls for a key start going through a peer (delegate.go): the queue
	// releases the key's blocked tasks so they need not wait for the
	// breaker's own probe.
	OnDelegate func(breakerpool.Key)
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.FallbackFactor < 0 || (c.FallbackFactor > 0 && c.FallbackFactor < 1) || c.FallbackFactor != c.FallbackFactor:
		return c, fmt.Errorf("hintpolicy: Config.FallbackFactor must be at least 1, got %v", c.FallbackFactor)
	case c.FallbackJitter < 0 || c.FallbackJitter > 1 || c.FallbackJitter != c.FallbackJitter:
		return c, fmt.Errorf("hintpolicy: Config.FallbackJitter must be in [0, 1], got %v", c.FallbackJitter)
	case c.MaxHoldTimeouts < 0, c.MaxPrecreated < 0, c.MaxKeys < 0, c.SuspectMinOpens < 0,
		c.WarnAfter < 0, c.ConfirmAttempts < 0, c.DistrustTimeouts < 0:
		return c, errors.New("hintpolicy: Config.MaxHoldTimeouts, MaxPrecreated, MaxKeys, SuspectMinOpens, " +
			"WarnAfter, ConfirmAttempts and DistrustTimeouts must not be negative")
	case c.KeyIdleTTL < 0, c.SuspectWindow < 0, c.Tick < 0, c.ConfirmWait < 0:
		return c, errors.New("hintpolicy: Config.KeyIdleTTL, SuspectWindow, Tick and ConfirmWait must not be negative")
	case c.SuspectRatio < 0 || c.SuspectRatio > 1 || c.SuspectRatio != c.SuspectRatio:
		return c, fmt.Errorf("hintpolicy: Config.SuspectRatio must be in [0, 1], got %v", c.SuspectRatio)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.FallbackFactor == 0 {
		c.FallbackFactor = DefaultFallbackFactor
	}
	if c.FallbackJitter == 0 {
		c.FallbackJitter = DefaultFallbackJitter
	}
	if c.SuspectRatio == 0 {
		c.SuspectRatio = DefaultSuspectRatio
	}
	def(&c.MaxHoldTimeouts, DefaultMaxHoldTimeouts)
	def(&c.MaxPrecreated, DefaultMaxPrecreated)
	def(&c.MaxKeys, DefaultMaxKeys)
	def(&c.SuspectMinOpens, DefaultSuspectMinOpens)
	defD(&c.KeyIdleTTL, DefaultKeyIdleTTL)
	defD(&c.SuspectWindow, DefaultSuspectWindow)
	defD(&c.Tick, DefaultPolicyTick)
	def(&c.WarnAfter, breakerpool.DefaultWarnAfter)
	def(&c.ConfirmAttempts, DefaultConfirmAttempts)
	def(&c.DistrustTimeouts, DefaultDistrustTimeouts)
	defD(&c.ConfirmWait, DefaultConfirmWait)
	return c, nil
}

// Pool is the part of the breaker pool the policy drives
// (*breakerpool.Pool).
type Pool interface {
	Get(k breakerpool.Key) *breakerpool.Breaker
	Lookup(k breakerpool.Key) (*breakerpool.Breaker, bool)
	// Destinations counts the distinct destinations of its breakers.
	Destinations() int
}

// Membership is the part of the membership the policy uses
// (*Membership).
type Membership interface {
	NodeID() string
	Members() []cluster.Member
	Member(id string) (cluster.Member, bool)
	Subscribe() (<-chan struct{}, func())
	Publish(h cluster.Hint) error
	UpdateMeta(fn func(*cluster.Meta)) error
	SetHintHandlers(sink cluster.HintSink, source cluster.HintSource)
}

// Policy is the breaker side of gossip: it publishes this node's local
// breaker transitions as hints, applies peers' hints to the pool according to
// each destination's HintPolicy, coordinates probing so that one node (the
// key's probe owner) probes an open destination, and withholds open hints
// while the node suspects its own egress. It implements HintSink and
// HintSource; feed it the pool's transitions with Observe.
type Policy struct {
	cfg     Config
	pool    Pool
	members Membership
	self    string
	log     *slog.Logger
	met     *policyMetrics

	owners    atomic.Pointer[ownerView]
	suspectOn atomic.Bool

	mu         sync.Mutex
	keys       map[breakerpool.Key]*keyState
	confirming map[breakerpool.Key]struct{} // keys with a pending confirmation round
	precreated int
	susp       suspicion
	suspDetail string // last detail while suspect, for Suspect()

	metaCh    chan struct{} // wakes the loop to gossip the suspect flag
	confirmCh chan struct{} // wakes the loop for a first pending confirmation
	stop      chan struct{}
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
	running   atomic.Bool
}

var (
	_ cluster.HintSink   = (*Policy)(nil)
	_ cluster.HintSource = (*Policy)(nil)
)

// New builds the hint policy for one node. Nothing runs until Start.
// logger nil discards logs; reg nil skips metric registration.
func New(cfg Config, pool Pool, members Membership, logger *slog.Logger, reg prometheus.Registerer) (*Policy, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if pool == nil || members == nil {
		return nil, errors.New("hintpolicy: New needs a pool and a membership")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	met, err := newPolicyMetrics(reg)
	if err != nil {
		return nil, err
	}
	p := &Policy{
		cfg: cfg, pool: pool, members: members, self: members.NodeID(),
		log: logger.With("component", "hints"), met: met,
		keys:       make(map[breakerpool.Key]*keyState),
		confirming: make(map[breakerpool.Key]struct{}),
		susp:       newSuspicion(cfg.SuspectWindow, cfg.SuspectMinOpens, cfg.SuspectRatio),
		metaCh:     make(chan struct{}, 1),
		confirmCh:  make(chan struct{}, 1),
		stop:       make(chan struct{}),
	}
	p.owners.Store(newOwnerView(members.Members(), p.self, false))
	return p, nil
}

// Start installs the policy as the membership's hint sink and source and
// starts its goroutine (membership changes, maintenance). Idempotent.
func (p *Policy) Start() {
	p.startOnce.Do(func() {
		sub, cancel := p.members.Subscribe()
		p.refreshOwners()
		p.running.Store(true)
		p.members.SetHintHandlers(p, p)
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			defer cancel()
			p.loop(sub)
		}()
		go func() {
			defer p.wg.Done()
			p.metaLoop()
		}()
	})
}

// Close uninstalls the hint handlers and stops the goroutine. Breakers keep
// their state. Idempotent.
func (p *Policy) Close() {
	p.closeOnce.Do(func() {
		p.startOnce.Do(func() {})
		if p.running.Swap(false) {
			p.members.SetHintHandlers(nil, nil)
		}
		close(p.stop)
		p.wg.Wait()
	})
}

// loop follows membership changes (probe owners) and runs maintenance.
func (p *Policy) loop(sub <-chan struct{}) {
	tick := time.NewTicker(p.cfg.Tick)
	defer tick.Stop()
	// Confirmation deadlines are checked four times per ConfirmWait.
	confirmTick := time.NewTicker(max(p.cfg.ConfirmWait/4, time.Millisecond))
	defer confirmTick.Stop()
	for {
		// The deadlines are checked only while a round is pending: a
		// ticker's channel that nobody waits on does not wake the runtime.
		var confirmC <-chan time.Time
		if p.anyConfirming() {
			confirmC = confirmTick.C
		}
		select {
		case <-p.stop:
			return
		case _, ok := <-sub:
			if !ok {
				sub = nil // membership closed
				continue
			}
			p.refreshOwners()
		case now := <-tick.C:
			p.maintain(now)
		case <-p.confirmCh: // a round began: wait on its deadline from now on
		case now := <-confirmC:
			p.confirmTick(now)
		}
	}
}

// anyConfirming reports whether a confirmation round is pending.
func (p *Policy) anyConfirming() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.confirming) > 0
}

// metaLoop gossips the suspect flag. It has its own goroutine because
// UpdateMeta waits for memberlist's broadcast (up to LeaveTimeout).
func (p *Policy) metaLoop() {
	sent := false
	for {
		select {
		case <-p.stop:
			return
		case <-p.metaCh:
		}
		if on := p.suspectOn.Load(); on != sent {
			if err := p.members.UpdateMeta(func(m *cluster.Meta) { m.Suspect = on }); err != nil {
				p.log.Debug("suspect flag not confirmed by gossip", "suspect", on, "err", err)
			}
			sent = on // in effect locally (and re-advertised) even if the wait timed out
		}
	}
}

// maintain slides the suspicion window, forgets idle keys and releases
// precreate slots.
func (p *Policy) maintain(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evaluateSuspicionLocked(now)
	p.gcLocked(now)
	p.sweepPrecreatedLocked()
}

// evaluateSuspicionLocked re-decides self-suspicion and wakes the loop when
// the verdict changed.
func (p *Policy) evaluateSuspicionLocked(now time.Time) {
	if !p.susp.evaluate(now, p.pool.Destinations) {
		return
	}
	on := p.susp.on
	p.suspectOn.Store(on)
	if on {
		p.suspDetail = p.susp.detail
		p.met.suspect.Set(1)
		p.log.Warn("suspecting own egress: withholding open hints", "detail", p.susp.detail)
	} else {
		p.suspDetail = ""
		p.met.suspect.Set(0)
		p.log.Info("burst of breaker openings cleared: publishing open hints again")
	}
	select {
	case p.metaCh <- struct{}{}:
	default:
	}
}

// Suspect reports whether this node suspects its own egress, with a detail
// for /readyz.
func (p *Policy) Suspect() (bool, string) {
	if !p.suspectOn.Load() {
		return false, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.susp.on, p.suspDetail
}

// Owner returns the probe owner of k as this node sees the membership.
func (p *Policy) Owner(k breakerpool.Key) string { return p.owners.Load().owner(k) }

// probeOwnerLocked is the node whose probe the others wait for while k is
// open: the probe owner among the key's trippers (keyState.trippers), the
// nodes whose own calls opened it and so have calls for it; "" when none of
// them is a candidate. Hashed over every member instead, the owner was
// often a node with no tasks for the key, which never probes and never
// sends the closed hint, and the others held on for their whole fallback:
// the first delivery after a destination came back took 1.8–2.3 Timeouts
// against 0.7–1.2 with a busy owner (the hint review). A key with an
// active health check keeps the owner over every member (Owner): its
// owner's health prober probes without a task.
func (p *Policy) probeOwnerLocked(k breakerpool.Key, st *keyState) string {
	return probeOwnerIn(p.owners.Load(), k, st, p.cfg.HealthChecked)
}

func probeOwnerIn(v *ownerView, k breakerpool.Key, st *keyState, healthChecked func(breakerpool.Key) bool) string {
	if healthChecked != nil && healthChecked(k) {
		return v.owner(k)
	}
	return v.ownerAmong(k, st.trippers)
}

// refreshOwners recomputes the probe-owner candidates; for every key that is
// open here and whose probe this node now owns, or no one does (its previous
// owner left or failed), it probes at once instead of waiting out the hold.
func (p *Policy) refreshOwners() {
	next := newOwnerView(p.members.Members(), p.self, p.suspectOn.Load())
	prev := p.owners.Swap(next)
	if next.equal(prev) {
		return
	}
	var takeover []breakerpool.Key
	p.mu.Lock()
	for k, st := range p.keys {
		if st.holdBound.IsZero() {
			continue
		}
		was, now := probeOwnerIn(prev, k, st, p.cfg.HealthChecked), probeOwnerIn(next, k, st, p.cfg.HealthChecked)
		if was != p.self && was != "" && (now == p.self || now == "") {
			takeover = append(takeover, k) // no one else with calls for it is left to probe
		}
	}
	p.mu.Unlock()
	for _, k := range takeover {
		if b, ok := p.pool.Lookup(k); ok && b.Settings().HintPolicy != breakerpool.HintOff {
			p.log.Info("took over probe ownership", "key", k.String())
			if p.cfg.HealthChecked != nil && p.cfg.HealthChecked(k) {
				continue // the health prober checks it at once, without a task
			}
			b.ProbeNow(breakerpool.SourceLocal) // a no-op unless open (and not operator-forced)
		}
	}
}

// fallback draws a non-owner's hold for one opening.
func (p *Policy) fallback(timeout time.Duration) time.Duration {
	f := p.cfg.FallbackFactor + p.cfg.FallbackJitter*rand.Float64()
	return time.Duration(float64(timeout) * f)
}

// holdBoundFor is the latest instant hints may keep an episode that starts
// now open: the longest possible first fallback plus MaxHoldTimeouts.
func (p *Policy) holdBoundFor(now time.Time, timeout time.Duration) time.Time {
	first := time.Duration(float64(timeout) * (p.cfg.FallbackFactor + p.cfg.FallbackJitter))
	return now.Add(first + time.Duration(p.cfg.MaxHoldTimeouts)*timeout)
}
