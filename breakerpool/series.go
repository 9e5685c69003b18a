package breakerpool

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sony/gobreaker/v2"
)

// Series cap: which breakers get per-destination series of their own.
const (
	// SeriesOther is the destination label of the series that sum the
	// breakers without series of their own.
	SeriesOther = "_other"
	// DefaultSeriesLimit is how many closed breakers get their own series
	// when Config.SeriesLimit is nil (dynconfig
	// fusebox.metrics.destinationSeriesLimit has the same default).
	DefaultSeriesLimit = 100
	// MaxNotClosedSeries bounds the breakers that get their own series for
	// being open or half-open. Past it (a mass outage, or our own egress
	// broken), the quietest of them are summed under SeriesOther too.
	MaxNotClosedSeries = 1000
)

// counterSnap holds a breaker's counters at one scrape: blocked, success,
// failure, rejected, then transitions[from][to].
type counterSnap [13]uint64

const (
	snapBlocked = iota
	snapSuccess
	snapFailure
	snapRejected
	snapTransitions
)

func snapOf(b *Breaker) (s counterSnap) {
	s[snapBlocked] = b.blocked.Load()
	s[snapSuccess] = b.success.Load()
	s[snapFailure] = b.failure.Load()
	s[snapRejected] = b.rejected.Load()
	for from := range b.transitions {
		for to := range b.transitions[from] {
			s[snapTransitions+3*from+to] = b.transitions[from][to].Load()
		}
	}
	return s
}

func (s *counterSnap) add(o, minus *counterSnap) {
	for i := range s {
		s[i] += o[i] - minus[i]
	}
}

// otherKey groups the summed series: the task group, and the namespace
// when it also has a breaker with series of its own (NamespaceShown), else
// SeriesOther: the namespaces are the submitters' free text, and one
// summed series set per namespace ever seen grew without bound.
type otherKey struct{ taskGroup, namespace string }

// otherEntry is a breaker summed under SeriesOther: only what it counted
// since it joined (base) is added, so the sum neither jumps when a busy
// key is demoted nor drops when one is promoted or evicted (its increments
// move to retired, last being its value at the previous scrape). key is
// the sum it was added to at the last scrape: a breaker whose namespace
// gains or loses series of its own moves to the other sum as if it left
// one and joined the other.
type otherEntry struct {
	base, last counterSnap
	key        otherKey
}

// seriesState is the cap's memory between scrapes.
type seriesState struct {
	limit func() int

	mu      sync.Mutex // one selection at a time (scrapes may overlap)
	members map[*Breaker]*otherEntry
	retired map[otherKey]*counterSnap

	// shown holds the keys that had series of their own at the last
	// scrape; nil before the first capped scrape and while the cap is off.
	shown atomic.Pointer[map[Key]struct{}]
	// shownNS holds the namespaces of those keys (NamespaceShown).
	shownNS    atomic.Pointer[map[string]struct{}]
	aggregated atomic.Int64 // breakers summed under SeriesOther at the last scrape
}

func newSeriesState(limit func() int) *seriesState {
	if limit == nil {
		limit = func() int { return DefaultSeriesLimit }
	}
	return &seriesState{limit: limit, members: map[*Breaker]*otherEntry{}, retired: map[otherKey]*counterSnap{}}
}

// SeriesShown reports whether k has per-destination series of its own, as
// of the last scrape: other collectors (the outbound request series) label
// k's destination SeriesOther otherwise, so both families show the same
// destinations. Before the first scrape, and with the cap off, every key
// is shown. A key new since the last scrape is shown while that scrape
// left the cap room (nothing summed, fewer shown than the limit): the next
// scrape selects it, so its first calls must not be counted under
// SeriesOther (they would stay there); should it be outnumbered by then,
// it is demoted like any key and its request series deleted.
func (p *Pool) SeriesShown(k Key) bool {
	if p.series == nil {
		return true
	}
	m := p.series.shown.Load()
	if m == nil {
		return true
	}
	if _, ok := (*m)[k]; ok {
		return true
	}
	// Not shown: summed at the last scrape, or new since. While that scrape
	// summed nothing, it can only be new.
	return p.series.aggregated.Load() == 0 && len(*m) < p.series.limit()
}

// NamespaceShown reports whether ns had a breaker with series of its own
// at the last scrape (or there is no cap yet): only such a namespace has
// summed series (destination SeriesOther) of its own; the others' are
// summed under namespace SeriesOther too, here and in the outbound request
// series.
func (p *Pool) NamespaceShown(ns string) bool {
	if p.series == nil {
		return true
	}
	m := p.series.shownNS.Load()
	if m == nil {
		return true
	}
	_, ok := (*m)[ns]
	return ok
}

// candidate is a live breaker at a scrape, with its lifetime call count.
type candidate struct {
	b     *Breaker
	calls uint64
}

// selection is one scrape's split of the live breakers.
type selection struct {
	shown  []*Breaker                // series of their own
	others map[otherKey][]*Breaker   // summed under SeriesOther
	sums   map[otherKey]*counterSnap // what the SeriesOther series read
}

// selectSeries splits the live breakers: every open or half-open one (up
// to MaxNotClosedSeries, busiest first) and the limit busiest closed ones
// get series of their own; the rest are summed per (task group,
// namespace). "Busiest" is the lifetime count of calls the breaker saw,
// ties broken by key, so the choice is stable between scrapes. limit < 0
// shows everything.
func (st *seriesState) selectSeries(p *Pool) selection {
	limit := st.limit()
	var notClosed, closed []candidate
	p.entries.Range(func(_ Key, b *Breaker) bool {
		if b.flags.Load()&flagDead != 0 {
			return true
		}
		c := candidate{b, b.success.Load() + b.failure.Load() + b.rejected.Load()}
		if limit >= 0 && b.State() == gobreaker.StateClosed {
			closed = append(closed, c)
		} else {
			notClosed = append(notClosed, c)
		}
		return true
	})
	if limit < 0 {
		st.shown.Store(nil)
		st.shownNS.Store(nil)
		st.aggregated.Store(0)
		st.mu.Lock()
		clear(st.members)
		st.mu.Unlock()
		sel := selection{shown: make([]*Breaker, len(notClosed))}
		for i, c := range notClosed {
			sel.shown[i] = c.b
		}
		return sel
	}
	busiest := func(a, b candidate) int {
		if c := cmp.Compare(b.calls, a.calls); c != 0 {
			return c
		}
		return cmp.Compare(a.b.key.String(), b.b.key.String())
	}
	var rest []candidate
	split := func(cs []candidate, n int) []candidate {
		if len(cs) > n {
			slices.SortFunc(cs, busiest)
			rest = append(rest, cs[n:]...)
			cs = cs[:n]
		}
		return cs
	}
	notClosed = split(notClosed, MaxNotClosedSeries)
	closed = split(closed, limit)

	sel := selection{shown: make([]*Breaker, 0, len(notClosed)+len(closed)),
		others: map[otherKey][]*Breaker{}, sums: map[otherKey]*counterSnap{}}
	shown := make(map[Key]struct{}, len(notClosed)+len(closed))
	shownNS := map[string]struct{}{}
	for _, cs := range [][]candidate{notClosed, closed} {
		for _, c := range cs {
			sel.shown = append(sel.shown, c.b)
			shown[c.b.key] = struct{}{}
			shownNS[c.b.key.NamespaceID] = struct{}{}
		}
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	members := make(map[*Breaker]*otherEntry, len(rest))
	retire := func(ok otherKey, e *otherEntry) {
		r := st.retired[ok]
		if r == nil {
			r = &counterSnap{}
			st.retired[ok] = r
		}
		r.add(&e.last, &e.base)
	}
	for _, c := range rest {
		ok := otherKey{c.b.key.TaskGroup, c.b.key.NamespaceID}
		if _, own := shownNS[ok.namespace]; !own {
			ok.namespace = SeriesOther
		}
		sel.others[ok] = append(sel.others[ok], c.b)
		cur := snapOf(c.b)
		e := st.members[c.b]
		if e != nil && e.key != ok { // left one sum for another
			retire(e.key, e)
			e = &otherEntry{base: e.last}
		}
		if e == nil {
			e = &otherEntry{base: cur}
		}
		e.key = ok
		e.last = cur
		members[c.b] = e
		delete(st.members, c.b)
		sum := sel.sums[ok]
		if sum == nil {
			sum = &counterSnap{}
			sel.sums[ok] = sum
		}
		sum.add(&e.last, &e.base)
	}
	// Whoever left the sum (promoted, evicted) keeps what it added.
	for _, e := range st.members {
		retire(e.key, e)
	}
	st.members = members
	// A sum no breaker is in any more is dropped, its series with it (a
	// series that ends, not a counter that goes down): kept, every
	// namespace ever summed stayed a series set for ever.
	for ok := range st.retired {
		if _, live := sel.others[ok]; !live {
			delete(st.retired, ok)
		}
	}
	for ok, r := range st.retired {
		sum := sel.sums[ok]
		if sum == nil {
			sum = &counterSnap{}
			sel.sums[ok] = sum
		}
		sum.add(r, &counterSnap{})
	}
	st.shown.Store(&shown)
	st.shownNS.Store(&shownNS)
	st.aggregated.Store(int64(len(rest)))
	return sel
}
