package ui

import (
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// DefaultCapacity is how many transitions a Recorder keeps when built with
// capacity 0.
const DefaultCapacity = 200

// MaxCapacity bounds a Recorder's capacity, and how many transitions are
// accepted from one peer when the cluster timeline is merged.
const MaxCapacity = 4096

// Transition is one breaker state change as the status page shows it. It is
// the JSON of GET /ui/api/transitions.
type Transition struct {
	// Node is the node whose breaker changed; set when a timeline is served.
	Node        string `json:"node,omitempty"`
	TaskGroup   string `json:"task_group"`
	Namespace   string `json:"namespace"`
	Destination string `json:"destination"`
	// From and To are closed, half-open or open.
	From string `json:"from"`
	To   string `json:"to"`
	// Source is local, hint or operator.
	Source     string `json:"source"`
	Generation uint64 `json:"generation"`
	// OpenForSeconds is the open period that started, when To is open.
	OpenForSeconds float64 `json:"open_for_seconds,omitempty"`
	// ByCheck: a health check decided the change without a call
	// (breakerpool.Transition.ByCheck), so a half-open → open with it cost
	// no task.
	ByCheck bool      `json:"by_check,omitempty"`
	At      time.Time `json:"at"`
	// Seq numbers the node's transitions from 1 in the order observed; it
	// orders transitions with equal At and shows how many were dropped.
	Seq uint64 `json:"seq"`
}

// Recorder keeps the last transitions of this node's breakers in a fixed
// ring: memory is bounded by its capacity however many breakers flap.
// Observe is the breaker pool's observer (or one of them); it never blocks
// on anything but a short mutex. Safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	ring []Transition
	next int    // slot the next transition goes to
	seq  uint64 // transitions observed so far
}

// NewRecorder returns a recorder of the last capacity transitions
// (0 means DefaultCapacity).
func NewRecorder(capacity int) (*Recorder, error) {
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	if capacity < 0 || capacity > MaxCapacity {
		return nil, fmt.Errorf("ui: recorder capacity: want 0..%d, got %d", MaxCapacity, capacity)
	}
	return &Recorder{ring: make([]Transition, 0, capacity)}, nil
}

// Capacity is how many transitions the recorder keeps.
func (r *Recorder) Capacity() int { return cap(r.ring) }

// Observe records t, evicting the oldest transition when the ring is full.
func (r *Recorder) Observe(t breakerpool.Transition) {
	rec := Transition{
		TaskGroup: t.Key.TaskGroup, Namespace: t.Key.NamespaceID, Destination: transport.RedactURL(t.Key.Destination),
		From: StateName(t.From), To: StateName(t.To), Source: string(t.Source),
		Generation: t.Generation, At: t.At, ByCheck: t.ByCheck,
	}
	if t.To == gobreaker.StateOpen && t.OpenFor > 0 {
		rec.OpenForSeconds = t.OpenFor.Seconds()
	}
	if rec.At.IsZero() {
		rec.At = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	rec.Seq = r.seq
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, rec)
	} else {
		r.ring[r.next] = rec
	}
	r.next = (r.next + 1) % cap(r.ring)
}

// Recent returns the recorded transitions, newest first (a copy).
func (r *Recorder) Recent() []Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Transition, 0, len(r.ring))
	// The newest is just before next; walk backwards around the ring.
	for i := 1; i <= len(r.ring); i++ {
		out = append(out, r.ring[(r.next-i+len(r.ring))%len(r.ring)])
	}
	return out
}

// Total is how many transitions were observed, including those the ring no
// longer holds.
func (r *Recorder) Total() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// StateName is the API's name for a breaker state: closed, half-open or
// open (the names of GET /v1/breakers).
func StateName(s gobreaker.State) string {
	switch s {
	case gobreaker.StateClosed:
		return "closed"
	case gobreaker.StateHalfOpen:
		return "half-open"
	case gobreaker.StateOpen:
		return "open"
	}
	return "unknown"
}
