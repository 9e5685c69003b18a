// Package healthprobe runs active health checks for open breakers: while a
// key's breaker is open and its destination has a health check, the key's
// probe owner calls the health URL every interval instead of spending a real
// task on a half-open probe. See DESIGN.md.
package healthprobe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
)

// Check is one destination's health check.
type Check struct {
	URL           string
	Interval      time.Duration
	Timeout       time.Duration
	HealthyStatus int
}

func (c Check) valid() bool {
	return c.URL != "" && c.Interval > 0 && c.Timeout > 0 && c.HealthyStatus >= 100 && c.HealthyStatus <= 599
}

// lease is how far each renewal pushes an open breaker's deadline: two
// intervals and a timeout, so a renewal every tick never lets it lapse while
// the prober runs, and a prober that stops leaves the breaker to its own
// timer within a lease.
func (c Check) lease() time.Duration { return 2*c.Interval + c.Timeout }

// Deps are what the prober works with. Pool and Checks are required.
type Deps struct {
	// Pool is the node's breaker pool.
	Pool *breakerpool.Pool
	// Checks returns the health check of a breaker key, if it has one.
	Checks func(k breakerpool.Key) (Check, bool)
	// Owner returns the key's probe owner (hintpolicy.Policy.Owner); nil or
	// "" means this node.
	Owner func(k breakerpool.Key) string
	// Allow checks a health URL against the outbound allowlist before each
	// call; nil allows.
	Allow func(ctx context.Context, k breakerpool.Key, rawURL string) error
	// Client makes the calls (the outbound executor's client); nil means
	// a plain client that follows no redirects.
	Client *http.Client
}

// Config tunes the prober. The zero value (with NodeID) is usable.
type Config struct {
	NodeID string
	// Tick is how often open keys are looked at (lease renewals, due
	// probes); default 50ms.
	Tick time.Duration
	// FallbackIntervals: a node that is not the key's probe owner checks
	// the health URL itself once per this many intervals of an open
	// episode (in case the owner's recovery hint was lost); default 10.
	FallbackIntervals int
	// MaxConcurrent bounds the health calls in flight; default 32.
	MaxConcurrent int
	// Resync is how often the pool is scanned for open breakers whose
	// transition event was missed; default 10s.
	Resync     time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Roles of a health call.
const (
	RoleOwner    = "owner"    // the key's probe owner, every interval
	RoleFallback = "fallback" // a non-owner, once per FallbackIntervals
	RoleSettle   = "settle"   // a half-open breaker no real call resolved
	RoleConfirm  = "confirm"  // the confirm hint policy asked this node to probe (CheckNow)
)

// Results of a health call.
const (
	ResultPass    = "pass"
	ResultFail    = "fail"    // answered with another status
	ResultError   = "error"   // transport error or timeout
	ResultRefused = "refused" // the outbound allowlist refused the URL
)

// Result is the last health call made for a key on this node.
type Result struct {
	At       time.Time     `json:"at"`
	Result   string        `json:"result"`
	Role     string        `json:"role"`
	Status   int           `json:"status,omitempty"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration"`
}

// keyState is the prober's view of one open or half-open key.
type keyState struct {
	since      time.Time // the open episode began (first seen open)
	nextProbe  time.Time // owner: next interval's call
	fallbackAt time.Time // non-owner: next own call
	halfGen    uint64    // the half-open generation being watched
	halfSince  time.Time
	inFlight   bool
	// confirm: a confirm round waits for this node's verdict (CheckNow);
	// the next call's result answers it, whatever its role.
	confirm bool
}

// Prober is one node's health checker. Observe feeds it transitions; it
// owns one loop goroutine plus one goroutine per call in flight.
type Prober struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	met  *metrics

	mu      sync.Mutex
	keys    map[breakerpool.Key]*keyState
	results map[breakerpool.Key]Result

	wake   chan struct{}
	sem    chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  sync.Once
	stop   sync.Once
}

// maxResults bounds the remembered last results (status page).
const maxResults = 4096

// New builds a prober; Start runs it.
func New(cfg Config, deps Deps) (*Prober, error) {
	if deps.Pool == nil || deps.Checks == nil {
		return nil, errors.New("healthprobe: Pool and Checks are required")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 50 * time.Millisecond
	}
	if cfg.FallbackIntervals <= 0 {
		cfg.FallbackIntervals = 10
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 32
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Client == nil {
		deps.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Prober{
		cfg: cfg, deps: deps, log: cfg.Logger, met: m,
		keys: map[breakerpool.Key]*keyState{}, results: map[breakerpool.Key]Result{},
		wake: make(chan struct{}, 1), sem: make(chan struct{}, cfg.MaxConcurrent),
		ctx: ctx, cancel: cancel,
	}, nil
}

// Start runs the loop. Idempotent.
func (p *Prober) Start() {
	p.start.Do(func() {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.loop()
		}()
	})
}

// Close stops the loop, cancels the calls in flight and waits for them.
// Idempotent.
func (p *Prober) Close() {
	p.stop.Do(func() {
		p.cancel()
		p.wg.Wait()
	})
}

// Observe takes a breaker transition (the pool's Observer); it never
// blocks. A key that leaves closed is tracked from now on.
func (p *Prober) Observe(t breakerpool.Transition) {
	if t.Kind != breakerpool.KindStateChange || t.To == t.From {
		return
	}
	p.mu.Lock()
	if _, ok := p.keys[t.Key]; !ok && t.To != gobreaker.StateClosed {
		p.keys[t.Key] = &keyState{since: time.Now()}
	}
	p.mu.Unlock()
	p.kick()
}

// kick wakes the loop for a key it may not track yet: while it tracks none
// it does not tick.
func (p *Prober) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// tracking reports whether any key is tracked.
func (p *Prober) tracking() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys) > 0
}

// Last returns the last health call made for k on this node.
func (p *Prober) Last(k breakerpool.Key) (Result, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.results[k]
	return r, ok
}

func (p *Prober) loop() {
	tick := time.NewTicker(p.cfg.Tick)
	defer tick.Stop()
	resync := time.NewTicker(p.cfg.Resync)
	defer resync.Stop()
	for {
		// Tick only while a key is tracked: an idle node's loop then sleeps
		// until a transition, a confirm or the resync (a ticker's channel
		// that nobody waits on does not wake the runtime).
		var tickC <-chan time.Time
		if p.tracking() {
			tickC = tick.C
		}
		select {
		case <-p.ctx.Done():
			return
		case <-tickC:
		case <-p.wake:
		case <-resync.C:
			p.resync()
		}
		p.pass(time.Now())
	}
}

// resync tracks every open or half-open breaker of the pool (a transition
// the observer queue dropped is otherwise never seen).
func (p *Prober) resync() {
	now := time.Now()
	for _, st := range p.deps.Pool.List() {
		if st.State == gobreaker.StateClosed {
			continue
		}
		p.mu.Lock()
		if _, ok := p.keys[st.Key]; !ok {
			p.keys[st.Key] = &keyState{since: now}
		}
		p.mu.Unlock()
	}
}

// pass looks at every tracked key once.
func (p *Prober) pass(now time.Time) {
	p.mu.Lock()
	keys := make([]breakerpool.Key, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	p.mu.Unlock()
	for _, k := range keys {
		p.step(k, now)
	}
}

// step renews the key's lease and starts a call when one is due.
func (p *Prober) step(k breakerpool.Key, now time.Time) {
	b, ok := p.deps.Pool.Lookup(k)
	check, has := p.deps.Checks(k)
	if !ok || !has || !check.valid() {
		p.forget(k)
		return
	}
	st := b.Status()
	if st.State == gobreaker.StateClosed {
		p.forget(k)
		return
	}
	if st.Mode != breakerpool.ModeAuto || st.RetryAfterUntil != nil {
		// An operator's force, or the destination's own Retry-After: not
		// ours to shorten or extend.
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := p.keys[k]
	if ks == nil {
		return
	}
	switch st.State {
	case gobreaker.StateOpen:
		ks.halfGen = 0
		if st.OpenRemaining < check.Interval+check.Timeout {
			b.ExtendOpen(check.lease())
		}
		if ks.nextProbe.IsZero() {
			ks.nextProbe = now.Add(check.Interval)
			ks.fallbackAt = now.Add(p.fallbackAfter(check))
		}
		if ks.inFlight {
			return
		}
		if p.isOwner(k) {
			if !now.Before(ks.nextProbe) {
				p.launchLocked(k, ks, b, check, RoleOwner, 0)
			}
		} else if !now.Before(ks.fallbackAt) {
			p.launchLocked(k, ks, b, check, RoleFallback, 0)
		}
	case gobreaker.StateHalfOpen:
		if ks.halfGen != st.Generation {
			ks.halfGen, ks.halfSince = st.Generation, now
			return
		}
		if !ks.inFlight && now.Sub(ks.halfSince) >= check.Interval {
			p.launchLocked(k, ks, b, check, RoleSettle, st.Generation)
		}
	}
}

// CheckNow is the confirm hint policy's probe (hintpolicy.Config
// .ConfirmProbe) for a key with a health check: a health call now instead
// of a real task. A pass warm-starts the breaker (half-open: the next real
// call closes it, and the policy reads that as the report refuted); a fail
// is a failed probe without a call (Breaker.FailedCheck: half-open → open,
// the report confirmed). A call already in flight answers instead. False
// when k has no health check (the caller probes with a task then).
func (p *Prober) CheckNow(k breakerpool.Key) bool {
	check, has := p.deps.Checks(k)
	if !has || !check.valid() {
		return false
	}
	b, ok := p.deps.Pool.Lookup(k)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := p.keys[k]
	if ks == nil {
		ks = &keyState{since: time.Now()}
		p.keys[k] = ks
		defer p.kick() // the loop must start ticking for it (non-blocking)
	}
	ks.confirm = true
	if !ks.inFlight {
		p.launchLocked(k, ks, b, check, RoleConfirm, 0)
	}
	return true
}

func (p *Prober) fallbackAfter(c Check) time.Duration {
	d := time.Duration(p.cfg.FallbackIntervals) * c.Interval
	return d + time.Duration(rand.Int64N(int64(c.Interval)+1))
}

func (p *Prober) isOwner(k breakerpool.Key) bool {
	if p.deps.Owner == nil {
		return true
	}
	o := p.deps.Owner(k)
	return o == "" || o == p.cfg.NodeID
}

func (p *Prober) forget(k breakerpool.Key) {
	p.mu.Lock()
	if ks := p.keys[k]; ks != nil && !ks.inFlight {
		delete(p.keys, k)
	}
	p.mu.Unlock()
}

// launchLocked starts one health call for k unless MaxConcurrent are in
// flight (then the next tick tries again).
func (p *Prober) launchLocked(k breakerpool.Key, ks *keyState, b *breakerpool.Breaker, c Check, role string, gen uint64) {
	select {
	case p.sem <- struct{}{}:
	default:
		return
	}
	ks.inFlight = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.sem }()
		r := p.call(k, c, role)
		p.finish(k, b, c, r, gen)
	}()
}

// finish applies a call's result to the breaker.
func (p *Prober) finish(k breakerpool.Key, b *breakerpool.Breaker, c Check, r Result, gen uint64) {
	if p.ctx.Err() != nil {
		p.mu.Lock()
		if ks := p.keys[k]; ks != nil {
			ks.inFlight = false
		}
		p.mu.Unlock()
		return // closing: the call was cancelled, not answered
	}
	healthy := r.Result == ResultPass
	var acted bool
	p.mu.Lock()
	confirm := false
	if ks := p.keys[k]; ks != nil {
		confirm, ks.confirm = ks.confirm, false
	}
	p.mu.Unlock()
	switch {
	case confirm && healthy:
		b.ProbeNow(breakerpool.SourceHealth)
		acted = b.State() == gobreaker.StateHalfOpen
	case confirm:
		acted = b.FailedCheck(0)
	case r.Role == RoleSettle:
		acted = b.SettleHalfOpen(gen, healthy, c.lease())
	case r.Role == RoleOwner || r.Role == RoleFallback:
		if healthy {
			b.ProbeNow(breakerpool.SourceHealth)
			acted = b.State() == gobreaker.StateHalfOpen
		} else {
			b.ExtendOpen(c.lease())
		}
	}
	p.met.checks.WithLabelValues(r.Role, r.Result).Inc()
	p.log.Debug("health check", "key", k.String(), "role", r.Role, "result", r.Result, "status", r.Status, "error", r.Error, "acted", acted)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.results) >= maxResults {
		if _, ok := p.results[k]; !ok {
			for old := range p.results {
				delete(p.results, old) // random eviction
				break
			}
		}
	}
	p.results[k] = r
	if ks := p.keys[k]; ks != nil {
		ks.inFlight = false
		ks.nextProbe = now.Add(c.Interval)
		if r.Role != RoleOwner {
			ks.fallbackAt = now.Add(p.fallbackAfter(c))
		}
		if r.Role == RoleSettle {
			ks.halfGen = 0
		}
	}
}

// call makes one GET to the health URL, bounded by the check's timeout.
func (p *Prober) call(k breakerpool.Key, c Check, role string) Result {
	start := time.Now()
	r := Result{At: start, Role: role}
	ctx, cancel := context.WithTimeout(p.ctx, c.Timeout)
	defer cancel()
	defer func() { r.Duration = time.Since(start) }()
	if p.deps.Allow != nil {
		if err := p.deps.Allow(ctx, k, c.URL); err != nil {
			r.Result, r.Error = ResultRefused, err.Error()
			return r
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		r.Result, r.Error = ResultError, "bad health URL"
		return r
	}
	req.Header.Set("User-Agent", "fusebox-healthcheck")
	resp, err := p.deps.Client.Do(req)
	if err != nil {
		r.Result, r.Error = ResultError, errorKind(ctx, err)
		return r
	}
	drain(resp)
	r.Status = resp.StatusCode
	if resp.StatusCode == c.HealthyStatus {
		r.Result = ResultPass
	} else {
		r.Result = ResultFail
		r.Error = fmt.Sprintf("status %d, want %d", resp.StatusCode, c.HealthyStatus)
	}
	return r
}
