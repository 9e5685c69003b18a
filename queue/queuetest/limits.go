package queuetest

import (
	"sync"
	"time"

	"fusebox/queue"
)

// LimitValues are one level of limits.
type LimitValues struct {
	BatchSize      int
	BufferSize     int
	Concurrency    int
	MaxTaskRPS     float64
	RequestTimeout time.Duration
	// RampStartRPS and RampDuration are the recovery ramp (queue.RampLimits);
	// RampDuration 0, the default here, is no ramp.
	RampStartRPS float64
	RampDuration time.Duration
	// FleetRPS is the fleet rate budget (queue.FleetLimits); 0 is none.
	FleetRPS float64
}

// DefaultLimits are Temporal's defaults (dynconfig's too).
func DefaultLimits() LimitValues {
	return LimitValues{BatchSize: 100, BufferSize: 100, Concurrency: 100, MaxTaskRPS: 100, RequestTimeout: 10 * time.Second}
}

// Limits is a settable queue.LimitsSource: defaults plus per-destination
// overrides (BatchSize is global only). Subscribers are called
// synchronously by the setters, so limits are applied when they return.
type Limits struct {
	mu     sync.Mutex
	cur    *snapshot
	subs   map[int]func()
	nextID int
}

type snapshot struct {
	def    LimitValues
	byDest map[string]LimitValues
}

// NewLimits returns limits at def.
func NewLimits(def LimitValues) *Limits {
	return &Limits{cur: &snapshot{def: def, byDest: map[string]LimitValues{}}, subs: map[int]func(){}}
}

// Current implements queue.LimitsSource.
func (l *Limits) Current() queue.Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// Subscribe implements queue.LimitsSource.
func (l *Limits) Subscribe(fn func()) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.nextID
	l.nextID++
	l.subs[id] = fn
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs, id)
	}
}

// SetDefault replaces the default level.
func (l *Limits) SetDefault(v LimitValues) { l.update(func(s *snapshot) { s.def = v }) }

// SetBatchSize changes only the batch size.
func (l *Limits) SetBatchSize(n int) { l.update(func(s *snapshot) { s.def.BatchSize = n }) }

// SetDestination overrides the limits of one destination.
func (l *Limits) SetDestination(dest string, v LimitValues) {
	l.update(func(s *snapshot) { s.byDest[dest] = v })
}

func (l *Limits) update(fn func(*snapshot)) {
	l.mu.Lock()
	next := &snapshot{def: l.cur.def, byDest: make(map[string]LimitValues, len(l.cur.byDest))}
	for k, v := range l.cur.byDest {
		next.byDest[k] = v
	}
	fn(next)
	l.cur = next
	subs := make([]func(), 0, len(l.subs))
	for _, f := range l.subs {
		subs = append(subs, f)
	}
	l.mu.Unlock()
	for _, f := range subs {
		f()
	}
}

func (s *snapshot) get(dest string) LimitValues {
	if v, ok := s.byDest[dest]; ok {
		return v
	}
	return s.def
}

func (s *snapshot) BatchSize() int                    { return s.def.BatchSize }
func (s *snapshot) BufferSize(_, dest string) int     { return s.get(dest).BufferSize }
func (s *snapshot) Concurrency(_, dest string) int    { return s.get(dest).Concurrency }
func (s *snapshot) MaxTaskRPS(_, dest string) float64 { return s.get(dest).MaxTaskRPS }
func (s *snapshot) RequestTimeout(_, _, dest string) time.Duration {
	return s.get(dest).RequestTimeout
}
func (s *snapshot) RampStartRPS(_, dest string) float64       { return s.get(dest).RampStartRPS }
func (s *snapshot) RampDuration(_, dest string) time.Duration { return s.get(dest).RampDuration }
func (s *snapshot) FleetRPS(_, dest string) float64           { return s.get(dest).FleetRPS }
