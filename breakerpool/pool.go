package breakerpool

import (
	"cmp"
	"fmt"
	"github.com/puzpuzpuz/xsync/v4"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Pool defaults.
const (
	DefaultIdleTTL       = 10 * time.Minute
	DefaultOpenJitter    = 0.2
	DefaultObserverQueue = 1024
	DefaultMaxOpenFor    = 24 * time.Hour
	// DefaultWarnAfter is the WarnAfter a fusebox node uses (Config's zero
	// value disables the early warning).
	DefaultWarnAfter = 2
)

// Config tunes a Pool. The zero value is usable.
type Config struct {
	// IdleTTL is how long a closed, failure-free breaker may go unused
	// before it is evicted. 0 means DefaultIdleTTL; negative disables
	// eviction.
	IdleTTL time.Duration
	// EvictInterval is the period of the background eviction sweep. 0 means
	// IdleTTL/4 (at least 1s).
	EvictInterval time.Duration
	// OpenJitter stretches each opening's Timeout by a random factor in
	// [1, 1+OpenJitter). 0 means DefaultOpenJitter; must be in [0, 1].
	OpenJitter float64
	// DisableJitter turns the jitter off (deterministic tests).
	DisableJitter bool
	// Observer receives every state transition, in order per key, on one
	// goroutine owned by the pool. It may be slow: events wait in a bounded
	// queue, and beyond it in an overflow that keeps each breaker's latest
	// (an earlier one it replaces is counted as dropped); it never blocks
	// a breaker. It runs outside every breaker lock, so it may call Pool
	// and Breaker methods.
	Observer func(Transition)
	// ObserverQueue is the queue length. 0 means DefaultObserverQueue.
	ObserverQueue int
	// MaxOpenFor caps OpenFor's duration. 0 means DefaultMaxOpenFor.
	MaxOpenFor time.Duration
	// WarnAfter, when > 0 and OnFailing is set, makes a closed breaker
	// report that its consecutive failures reached WarnAfter (a KindFailing
	// event), once per failure streak, before it trips. 0 disables it;
	// nodes use DefaultWarnAfter. Values at or above a breaker's
	// FailureThreshold never fire for it (the trip is reported instead).
	WarnAfter int
	// WarnUntil, when above WarnAfter, makes the breaker report the same
	// streak again at each further consecutive failure up to WarnUntil (one
	// event per count, Failures says which), so consumers can act at
	// different counts (the hint policy's confirm warns at 1, probe and
	// adopt at 2). 0 or at most WarnAfter: one event per streak. At most 255.
	WarnUntil int
	// OnFailing receives the KindFailing events, through the same bounded
	// queue and goroutine as Observer (in order with the key's
	// transitions). It has Observer's freedoms and limits.
	OnFailing func(Transition)
	// SeriesLimit returns, at each scrape, how many closed breakers get
	// series of their own (the busiest); the rest are summed under
	// destination "_other" (series.go). Negative: no cap. Nil means
	// DefaultSeriesLimit.
	SeriesLimit func() int
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.OpenJitter < 0 || c.OpenJitter > 1 || c.OpenJitter != c.OpenJitter:
		return c, fmt.Errorf("breakerpool: OpenJitter: must be in [0, 1], got %v", c.OpenJitter)
	case c.ObserverQueue < 0:
		return c, fmt.Errorf("breakerpool: ObserverQueue: must not be negative, got %d", c.ObserverQueue)
	case c.EvictInterval < 0:
		return c, fmt.Errorf("breakerpool: EvictInterval: must not be negative, got %v", c.EvictInterval)
	case c.MaxOpenFor < 0:
		return c, fmt.Errorf("breakerpool: MaxOpenFor: must not be negative, got %v", c.MaxOpenFor)
	case c.WarnAfter < 0 || c.WarnAfter > math.MaxUint32:
		return c, fmt.Errorf("breakerpool: WarnAfter: must be in [0, %d], got %d", uint32(math.MaxUint32), c.WarnAfter)
	case c.WarnUntil < 0 || c.WarnUntil > maxWarnUntil:
		return c, fmt.Errorf("breakerpool: WarnUntil: must be in [0, %d], got %d", maxWarnUntil, c.WarnUntil)
	}
	if c.IdleTTL == 0 {
		c.IdleTTL = DefaultIdleTTL
	}
	if c.EvictInterval == 0 {
		c.EvictInterval = max(c.IdleTTL/4, time.Second)
	}
	if c.OpenJitter == 0 {
		c.OpenJitter = DefaultOpenJitter
	}
	if c.DisableJitter {
		c.OpenJitter = 0
	}
	if c.ObserverQueue == 0 {
		c.ObserverQueue = DefaultObserverQueue
	}
	if c.MaxOpenFor == 0 {
		c.MaxOpenFor = DefaultMaxOpenFor
	}
	return c, nil
}

// Pool holds one breaker per Key, created lazily, evicted when idle. It is
// the per-host singleton that main builds and injects.
type Pool struct {
	cfg        Config
	src        SettingsSource
	log        *slog.Logger
	jitter     float64
	maxOpenFor time.Duration
	warnAfter  uint32    // 0: no KindFailing events
	warnUntil  uint32    // last count reported per streak (≥ warnAfter)
	base       time.Time // origin of the pool's monotonic clock

	// entries maps Key → *Breaker. xsync.Map reads are lock-free and hash
	// the typed key directly; sync.Map's interface keys cost the hot path
	// a reflective hash and ~30 ns more per lookup (docs/benchmarks.md).
	entries *xsync.Map[Key, *Breaker]
	n       atomic.Int64

	// read is an immutable Go-map copy of entries that Get tries first,
	// nil while the pool is larger than readMaxKeys (read.go).
	read   atomic.Pointer[map[Key]*Breaker]
	misses atomic.Int64
	readMu sync.Mutex // one rebuild at a time

	events  chan Transition
	over    *overflow // events the queue refused (overflow.go)
	dropped prometheus.Counter
	evicted prometheus.Counter

	settingsSeq  atomic.Uint64
	lastSettings atomic.Pointer[Settings]
	settingsCh   chan struct{}
	sweepMu      sync.Mutex

	series *seriesState // per-destination series cap (series.go)

	startOnce, closeOnce sync.Once
	stop                 chan struct{}
	wg                   sync.WaitGroup
	cancelSub            func()
}

// New builds a pool. src resolves settings (nil: DefaultSettings for every
// key); reg receives the metrics (nil: none); log nil discards.
func New(cfg Config, src SettingsSource, reg prometheus.Registerer, log *slog.Logger) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if src == nil {
		src = defaultSource{}
	}
	p := &Pool{
		cfg:        cfg,
		src:        src,
		log:        log,
		jitter:     cfg.OpenJitter,
		maxOpenFor: cfg.MaxOpenFor,
		base:       time.Now(),
		entries:    xsync.NewMap[Key, *Breaker](),
		events:     make(chan Transition, cfg.ObserverQueue),
		over:       newOverflow(),
		settingsCh: make(chan struct{}, 1),
		stop:       make(chan struct{}),
	}
	p.read.Store(&map[Key]*Breaker{})
	if cfg.OnFailing != nil {
		p.warnAfter = uint32(cfg.WarnAfter)
		p.warnUntil = max(p.warnAfter, uint32(cfg.WarnUntil))
	}
	if err := p.registerMetrics(reg); err != nil {
		return nil, err
	}
	return p, nil
}

// compareAndDelete removes k only while it still maps to b.
func (p *Pool) compareAndDelete(k Key, b *Breaker) bool {
	deleted := false
	p.entries.Compute(k, func(old *Breaker, loaded bool) (*Breaker, xsync.ComputeOp) {
		if loaded && old == b {
			deleted = true
			return nil, xsync.DeleteOp
		}
		return old, xsync.CancelOp
	})
	return deleted
}

// mono is the pool's monotonic clock.
func (p *Pool) mono() time.Duration { return time.Since(p.base) }

// Start subscribes to settings changes and starts the observer and
// maintenance (settings refresh, eviction) goroutines. Idempotent.
func (p *Pool) Start() {
	p.startOnce.Do(func() {
		p.cancelSub = p.src.Subscribe(p.onSettingsChanged)
		p.wg.Add(2)
		go p.observeLoop()
		go p.maintainLoop()
	})
}

// Close stops the pool's goroutines and its settings subscription. Events
// still queued are dropped. Breakers stay usable. Idempotent.
func (p *Pool) Close() {
	p.closeOnce.Do(func() {
		p.startOnce.Do(func() {}) // a later Start does nothing
		close(p.stop)
		if p.cancelSub != nil {
			p.cancelSub()
		}
		p.wg.Wait()
	})
}

// Get returns the breaker for k, creating it on first use.
func (p *Pool) Get(k Key) *Breaker {
	if m := p.read.Load(); m != nil {
		if b := (*m)[k]; b != nil {
			b.touch() // must precede the flags load (eviction handshake)
			if b.flags.Load()&flagDead == 0 {
				return b
			}
		}
		p.missed()
	}
	return p.getEntry(k)
}

// getEntry is Get through entries: for a key the read copy lacks or holds
// dead, or every key of a pool too large for the copy.
func (p *Pool) getEntry(k Key) *Breaker {
	for {
		if b, ok := p.entries.Load(k); ok {
			b.touch() // must precede the flags load (eviction handshake)
			if b.flags.Load()&flagDead == 0 {
				return b
			}
			waitUnlocked() // being evicted: it is deleted or revived shortly
			continue
		}
		seq := p.settingsSeq.Load()
		b := newBreaker(p, k, p.intern(p.resolve(k)))
		b.used.Store(true)
		if _, loaded := p.entries.LoadOrStore(k, b); loaded {
			continue
		}
		p.n.Add(1)
		if p.settingsSeq.Load() != seq {
			// A change may have been broadcast before b was visible.
			b.applySettings(p.resolve(k))
		}
		return b
	}
}

// Lookup returns the breaker for k if it exists. It never creates one and
// does not count as use.
func (p *Pool) Lookup(k Key) (*Breaker, bool) {
	b, ok := p.entries.Load(k)
	if !ok {
		return nil, false
	}
	if b.flags.Load()&flagDead != 0 {
		return nil, false
	}
	return b, true
}

// List returns a snapshot of every breaker, sorted by key. It never creates
// entries and does not count as use.
func (p *Pool) List() []Status {
	out := make([]Status, 0, p.Len())
	p.entries.Range(func(_ Key, b *Breaker) bool {
		if b.flags.Load()&flagDead == 0 {
			out = append(out, b.Status())
		}
		return true
	})
	slices.SortFunc(out, func(a, b Status) int { return compareKeys(a.Key, b.Key) })
	return out
}

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.TaskGroup, b.TaskGroup),
		cmp.Compare(a.NamespaceID, b.NamespaceID),
		cmp.Compare(a.Destination, b.Destination))
}

// Len returns the number of breakers.
func (p *Pool) Len() int { return int(p.n.Load()) }

// Destinations returns the number of distinct destinations of the
// breakers: a walk of the pool, for the rare reader that needs it (the
// hint policy's self-suspicion, during a burst of openings).
func (p *Pool) Destinations() int {
	seen := make(map[string]struct{})
	p.entries.Range(func(k Key, b *Breaker) bool {
		if b.flags.Load()&flagDead == 0 {
			seen[k.Destination] = struct{}{}
		}
		return true
	})
	return len(seen)
}

// resolve asks the source for k's settings, falling back to defaults (and
// logging) if the source returns invalid ones.
func (p *Pool) resolve(k Key) Settings {
	s := p.src.Settings(k.NamespaceID, k.Destination).Normalized()
	if err := s.Validate(); err != nil {
		p.log.Error("invalid breaker settings from source, using defaults", "key", k.String(), "err", err)
		return DefaultSettings()
	}
	return s
}

// intern returns a shared pointer for s when it equals the last settings
// interned (the common case: most keys share the default), so idle breakers
// do not each hold a copy. Settings pointers are never mutated.
func (p *Pool) intern(s Settings) *Settings {
	if last := p.lastSettings.Load(); last != nil && *last == s {
		return last
	}
	ps := &s
	p.lastSettings.Store(ps)
	return ps
}

// defaultSource gives every key DefaultSettings.
type defaultSource struct{}

func (defaultSource) Settings(string, string) Settings { return DefaultSettings() }
func (defaultSource) Subscribe(func()) func()          { return func() {} }
