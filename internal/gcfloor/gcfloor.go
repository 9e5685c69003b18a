// Package gcfloor keeps the Go collector's heap goal at or above a floor.
//
// With GOGC=100 the collector runs each time the heap doubles its live
// bytes. A fusebox node whose live heap is small — a postgres-store node
// holds a bounded window of tasks, not the table — then collects every few
// megabytes allocated, and each cycle has costs that do not shrink with the
// heap (stack scans and preemption of every goroutine, the sweep, waking
// the background workers). Five such nodes on one PostgreSQL spent about a
// fifth of their CPU per task more than with a higher GOGC (docs/benchmarks.md).
//
// The floor raises GOGC just enough that the next heap goal is the floor
// while the live heap is small, and leaves it at the process's base (100,
// Go's default) once twice the live heap is above the floor: a Raft-store
// node whose task table is hundreds of megabytes is collected as Go would.
// Memory stays bounded by max(floor, what Go's default would use). A
// GOMEMLIMIT still applies: the runtime collects sooner as it is approached.
//
// It is re-tuned after every collection: a finalizer on a sentinel object
// runs once per cycle and re-arms itself (the technique of Uber's and
// ByteDance's GC tuners; the standard library has no post-GC hook). It
// reads the live heap from runtime/metrics and calls debug.SetGCPercent,
// which takes the heap lock, not the world. No goroutine and no timer: an
// idle process that does not collect is not woken.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

const liveMetric = "/gc/heap/live:bytes"

// BasePercent is the GOGC the tuner never goes below: Go's default.
const BasePercent = 100

// Tuner raises GOGC while the live heap is under half the floor.
type Tuner struct {
	floor   uint64
	stopped atomic.Bool
	mu      sync.Mutex // percent, sample
	percent int
	sample  []metrics.Sample
	tunes   atomic.Uint64
}

// sentinel is the object whose finalizer runs once per GC cycle. It holds a
// pointer, so the tiny allocator never batches it with other objects (a
// batched one may never be finalized).
type sentinel struct{ t *Tuner }

// Start tunes GOGC for a heap floor of floor bytes from now on, and sets it
// once at once. The process's GOGC must be Go's default (the caller leaves
// the collector alone when the operator set GOGC). Stop undoes it.
func Start(floor uint64) *Tuner {
	t := &Tuner{floor: floor, percent: BasePercent, sample: []metrics.Sample{{Name: liveMetric}}}
	t.tune()
	t.arm()
	return t
}

func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

// Percent returns the GOGC the tuner last set.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Tunes returns how many times the tuner has run (once per GC cycle).
func (t *Tuner) Tunes() uint64 { return t.tunes.Load() }

// Stop stops tuning and restores the base GOGC. It is safe to call twice.
func (t *Tuner) Stop() {
	if t.stopped.Swap(true) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	debug.SetGCPercent(BasePercent)
	t.percent = BasePercent
}

func (t *Tuner) tune() {
	t.tunes.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := percentFor(t.floor, live)
	// Only a real change: SetGCPercent recomputes the pacer's goal.
	if p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// percentFor is the GOGC that puts the next heap goal at floor: about
// live × (1 + GOGC/100), and never below BasePercent. It is capped where
// the runtime's minimum heap (4 MiB × GOGC/100) reaches the floor, so a
// nearly empty heap's goal is the floor, not above it.
func percentFor(floor, live uint64) int {
	const minHeap = 4 << 20 // the runtime's heap minimum at GOGC=100
	if live == 0 {
		live = 1 << 20 // before the first cycle: as if 1 MiB were live
	}
	if floor <= 2*live {
		return BasePercent
	}
	p := min((floor-live)*100/live, floor*100/minHeap)
	return int(max(p, BasePercent))
}
