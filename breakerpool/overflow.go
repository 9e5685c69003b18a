package breakerpool

import (
	"sync"
	"sync/atomic"
)

// The observer queue's overflow (DESIGN.md, "Observer").
//
// Transitions go to the observer through a bounded channel, sent without
// blocking under the breaker's lock. A full channel dropped them: a node
// whose egress failed tripped thousands of breakers within milliseconds, the
// observer (logging, the hint policy, the queue, the status page) saw the
// first 1,024, and the rest were lost — the hint policy's self-suspicion
// counted a fraction of the opens and could publish the ones it saw as if
// the destinations were down, and a lost close left its key's blocked
// tasks to their turns and its policy state open for good. Now an event the
// channel refuses is kept in a map by key and kind, the latest replacing
// an earlier one still waiting (counted as dropped: its key's later state
// supersedes it), and delivered once the channel is empty. So every key's
// latest transition reaches the observer, however large the burst, in a
// memory bounded by the keys. Per-key order holds: while the map holds
// anything every event goes to it, so each event in the channel is older
// than those in the map, and the observer delivers the map only with the
// channel empty, all of it before reading the channel again.

type overflowKey struct {
	key  Key
	kind TransitionKind
}

type overflow struct {
	n     atomic.Int64 // events waiting; read without mu on emit's path
	mu    sync.Mutex
	m     map[overflowKey]int // index into order
	order []Transition        // first-arrival order, each slot its key's latest event
	wake  chan struct{}       // 1-slot: the map has events
}

func newOverflow() *overflow {
	return &overflow{wake: make(chan struct{}, 1)}
}

// put keeps t, replacing its key's waiting event; it reports whether one
// was replaced.
func (o *overflow) put(t Transition) (replaced bool) {
	o.mu.Lock()
	k := overflowKey{t.Key, t.Kind}
	if i, ok := o.m[k]; ok {
		o.order[i] = t
		replaced = true
	} else {
		if o.m == nil {
			o.m = make(map[overflowKey]int)
		}
		o.m[k] = len(o.order)
		o.order = append(o.order, t)
		o.n.Add(1)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return replaced
}

// take returns and forgets every waiting event, in first-arrival order.
func (o *overflow) take() []Transition {
	if o.n.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.order
	o.order, o.m = nil, nil
	o.n.Store(0)
	return out
}
