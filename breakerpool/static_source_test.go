package breakerpool

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// StaticSource is an in-memory SettingsSource for this package's tests (the
// production source is dynconfig.Collection, which imports this package, so
// these tests cannot use it; tests elsewhere do): a default plus overrides per
// namespace, per destination and per (namespace, destination) pair. The most
// specific value wins: pair, then destination, then namespace, then the
// default. An override is a whole Settings value, not a patch. It is safe
// for concurrent use.
type StaticSource struct {
	mu   sync.RWMutex
	def  Settings
	ns   map[string]Settings
	dest map[string]Settings
	pair map[[2]string]Settings

	subMu  sync.Mutex
	subs   map[uint64]*subscription
	nextID uint64
}

type subscription struct {
	mu        sync.Mutex // serializes calls to fn
	fn        func()
	cancelled atomic.Bool
}

var _ SettingsSource = (*StaticSource)(nil)

// NewStaticSource returns a source whose default is def (validated and
// normalized).
func NewStaticSource(def Settings) (*StaticSource, error) {
	def, err := checkSettings(def)
	if err != nil {
		return nil, fmt.Errorf("default settings: %w", err)
	}
	return &StaticSource{
		def:  def,
		ns:   map[string]Settings{},
		dest: map[string]Settings{},
		pair: map[[2]string]Settings{},
		subs: map[uint64]*subscription{},
	}, nil
}

func checkSettings(s Settings) (Settings, error) {
	s = s.Normalized()
	return s, s.Validate()
}

// Settings returns the most specific settings for the pair.
func (s *StaticSource) Settings(namespaceID, destination string) Settings {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if v, ok := s.pair[[2]string{namespaceID, destination}]; ok {
		return v
	}
	if v, ok := s.dest[destination]; ok {
		return v
	}
	if v, ok := s.ns[namespaceID]; ok {
		return v
	}
	return s.def
}

// SetDefault replaces the default settings.
func (s *StaticSource) SetDefault(v Settings) error {
	return s.set(v, func(v Settings) { s.def = v })
}

// SetNamespace overrides the settings of every destination of a namespace.
func (s *StaticSource) SetNamespace(namespaceID string, v Settings) error {
	return s.set(v, func(v Settings) { s.ns[namespaceID] = v })
}

// SetDestination overrides the settings of a destination in every namespace.
func (s *StaticSource) SetDestination(destination string, v Settings) error {
	return s.set(v, func(v Settings) { s.dest[destination] = v })
}

// SetPair overrides the settings of one (namespace, destination) pair.
func (s *StaticSource) SetPair(namespaceID, destination string, v Settings) error {
	return s.set(v, func(v Settings) { s.pair[[2]string{namespaceID, destination}] = v })
}

// DeleteNamespace removes a namespace override.
func (s *StaticSource) DeleteNamespace(namespaceID string) {
	s.update(func() { delete(s.ns, namespaceID) })
}

// DeleteDestination removes a destination override.
func (s *StaticSource) DeleteDestination(destination string) {
	s.update(func() { delete(s.dest, destination) })
}

// DeletePair removes a pair override.
func (s *StaticSource) DeletePair(namespaceID, destination string) {
	s.update(func() { delete(s.pair, [2]string{namespaceID, destination}) })
}

func (s *StaticSource) set(v Settings, store func(Settings)) error {
	v, err := checkSettings(v)
	if err != nil {
		return err
	}
	s.update(func() { store(v) })
	return nil
}

func (s *StaticSource) update(fn func()) {
	s.mu.Lock()
	fn()
	s.mu.Unlock()
	s.notify()
}

// Subscribe registers fn, called after every Set/Delete. Calls to one fn are
// serialized; different subscribers are called one after another on the
// goroutine that made the change. cancel is idempotent.
func (s *StaticSource) Subscribe(fn func()) (cancel func()) {
	sub := &subscription{fn: fn}
	s.subMu.Lock()
	id := s.nextID
	s.nextID++
	s.subs[id] = sub
	s.subMu.Unlock()
	return func() {
		sub.cancelled.Store(true)
		s.subMu.Lock()
		delete(s.subs, id)
		s.subMu.Unlock()
	}
}

func (s *StaticSource) notify() {
	s.subMu.Lock()
	subs := make([]*subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		subs = append(subs, sub)
	}
	s.subMu.Unlock()
	for _, sub := range subs {
		sub.mu.Lock()
		if !sub.cancelled.Load() {
			sub.fn()
		}
		sub.mu.Unlock()
	}
}
