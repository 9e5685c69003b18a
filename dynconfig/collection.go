package dynconfig

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"fusebox/breakerpool"
)

// Collection is the live view of dynamic config: the current *Snapshot
// behind an atomic pointer, replaced by Update and read lock-free by
// Current. It notifies subscribers when the table really changed.
//
// Each subscriber has its own goroutine and a one-slot "changed" signal:
// Update only swaps the pointer and does a non-blocking send per subscriber,
// so a slow subscriber never holds up Update (which raftstore calls from its
// FSM). Signals coalesce: a subscriber that is busy while several updates
// land is called once more afterwards and reads Current then. Calls to one
// subscriber are therefore never concurrent.
type Collection struct {
	logger *slog.Logger
	cur    atomic.Pointer[Snapshot]

	mu     sync.Mutex // serializes Update; guards subs and closed
	subs   map[*subscriber]struct{}
	closed bool
	wg     sync.WaitGroup // subscriber goroutines
}

var _ breakerpool.SettingsSource = (*Collection)(nil)

// NewCollection returns a collection holding an empty snapshot (every key at
// its default). A nil logger discards logs.
func NewCollection(logger *slog.Logger) *Collection {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Collection{logger: logger, subs: make(map[*subscriber]struct{})}
	c.cur.Store(empty)
	return c
}

// Current returns the current snapshot. It never returns nil.
func (c *Collection) Current() *Snapshot { return c.cur.Load() }

// Settings implements breakerpool.SettingsSource.
func (c *Collection) Settings(namespaceID, destination string) breakerpool.Settings {
	return c.Current().BreakerSettings(namespaceID, destination)
}

// Update replaces the table with entries (the whole table, not a delta).
// Invalid entries are skipped and logged. When the resulting values differ
// from the current ones, the new snapshot becomes current and every
// subscriber is signalled; an identical table changes nothing.
func (c *Collection) Update(entries []Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err := buildSnapshot(entries, c.cur.Load())
	if err != nil {
		c.logger.Warn("dynamic config: skipped invalid entries", "error", err)
	}
	if next.Equal(c.cur.Load()) {
		return
	}
	c.cur.Store(next)
	c.logger.Debug("dynamic config changed", "entries", len(next.entries), "subscribers", len(c.subs))
	for s := range c.subs {
		s.signal()
	}
}

// Subscribe registers fn to be called after the config changed; fn reads
// Current itself. It is not called for the snapshot current at Subscribe
// time. fn must not call Close. The returned cancel is idempotent and may be
// called from fn itself; once it returns no further call is started, though
// a call already under way (or just past its cancellation check) completes.
func (c *Collection) Subscribe(fn func()) (cancel func()) {
	s := &subscriber{fn: fn, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return func() {}
	}
	c.subs[s] = struct{}{}
	c.wg.Add(1)
	go s.run(&c.wg)
	return func() {
		s.cancel()
		c.mu.Lock()
		delete(c.subs, s)
		c.mu.Unlock()
	}
}

// Close stops every subscriber goroutine and waits for them to return.
// Update and Current keep working; Subscribe after Close never calls fn.
// Close is idempotent.
func (c *Collection) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		for s := range c.subs {
			s.cancel()
		}
		clear(c.subs)
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

type subscriber struct {
	fn      func()
	kick    chan struct{} // capacity 1: a pending "changed" signal
	stop    chan struct{}
	stopped atomic.Bool
	once    sync.Once
}

// signal leaves a pending call; it never blocks.
func (s *subscriber) signal() {
	select {
	case s.kick <- struct{}{}:
	default: // a call is already pending; it will read the newest snapshot
	}
}

func (s *subscriber) cancel() {
	s.once.Do(func() {
		s.stopped.Store(true)
		close(s.stop)
	})
}

func (s *subscriber) run(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			if s.stopped.Load() {
				return
			}
			s.fn()
		}
	}
}
