package breakerpool

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrape gathers reg and returns name{destination} → value for the
// per-breaker families (requests summed over outcomes).
func scrape(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			d := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "destination" {
					d = l.GetValue()
				}
			}
			out[mf.GetName()+"{"+d+"}"] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

func key(i int) Key {
	return Key{TaskGroup: TaskGroupNexusInvocation, NamespaceID: "ns1", Destination: fmt.Sprintf("ep-%d", i)}
}

// TestSeriesCap: with a limit of 2, the two busiest closed breakers and
// every open one have series of their own; the others are summed under
// destination "_other", whose counters never go down as breakers move in
// and out of it or are evicted. A limit of -1 shows everything.
func TestSeriesCap(t *testing.T) {
	var limit atomic.Int64
	limit.Store(2)
	p := newTestPool(t, fastSettings(), Config{SeriesLimit: func() int { return int(limit.Load()) }})
	for i := range 5 {
		for range 10 * (i + 1) { // ep-4 busiest, ep-0 quietest
			mustCall(t, p.Get(key(i)), true)
		}
	}
	trip(t, p.Get(key(0))) // open: shown although the quietest
	m := scrape(t, p.reg)
	for _, d := range []string{"ep-0", "ep-3", "ep-4"} {
		if _, ok := m["fusebox_breaker_requests_total{"+d+"}"]; !ok {
			t.Errorf("%s has no series of its own: %v", d, m)
		}
	}
	for _, d := range []string{"ep-1", "ep-2"} {
		if _, ok := m["fusebox_breaker_requests_total{"+d+"}"]; ok {
			t.Errorf("%s has series of its own beyond the limit", d)
		}
		if p.SeriesShown(key(1)) {
			t.Errorf("SeriesShown(%s) true beyond the limit", d)
		}
	}
	if !p.SeriesShown(key(4)) || !p.SeriesShown(key(0)) {
		t.Error("SeriesShown false for a shown key")
	}
	if got := m["fusebox_breaker_series_aggregated{}"]; got != 2 {
		t.Errorf("aggregated %v, want 2", got)
	}
	if got, ok := m["fusebox_breaker_requests_total{_other}"]; !ok || got != 0 {
		t.Errorf("_other requests %v (present %v), want 0: only what members count while summed", got, ok)
	}
	if _, ok := m["fusebox_breaker_state{_other}"]; ok {
		t.Error("_other must have no state series")
	}

	// Calls while summed show in _other.
	for range 3 {
		mustCall(t, p.Get(key(1)), true)
		mustCall(t, p.Get(key(2)), false)
	}
	m = scrape(t, p.reg)
	if got := m["fusebox_breaker_requests_total{_other}"]; got != 6 {
		t.Errorf("_other requests %v, want 6", got)
	}
	if got := m["fusebox_breaker_consecutive_failures{_other}"]; got != 3 {
		t.Errorf("_other consecutive failures %v, want the worst member's 3", got)
	}

	// ep-1 becomes the busiest closed breaker: promoted, _other keeps its 3.
	for range 100 {
		mustCall(t, p.Get(key(1)), true)
	}
	m = scrape(t, p.reg)
	if _, ok := m["fusebox_breaker_requests_total{ep-1}"]; !ok {
		t.Error("ep-1 not promoted")
	}
	if got := m["fusebox_breaker_requests_total{_other}"]; got < 6 {
		t.Errorf("_other requests went down to %v after a promotion", got)
	}

	limit.Store(-1)
	m = scrape(t, p.reg)
	for i := range 5 {
		if _, ok := m[fmt.Sprintf("fusebox_breaker_requests_total{ep-%d}", i)]; !ok {
			t.Errorf("cap off: ep-%d has no series", i)
		}
	}
	if !p.SeriesShown(key(2)) {
		t.Error("cap off: SeriesShown false")
	}
}

// A key that first calls after a scrape, while that scrape left the cap
// room, is shown at once: its first calls are not counted under _other
// (the request series label them by SeriesShown when they happen, and
// would keep them there). Once the cap is full, a new key is not.
func TestSeriesShownForANewKeyWhileTheCapHasRoom(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{SeriesLimit: func() int { return 2 }})
	mustCall(t, p.Get(key(0)), true)
	scrape(t, p.reg) // ep-0 shown, room for one more
	if !p.SeriesShown(key(1)) {
		t.Fatal("a key new since a scrape that left room is not shown")
	}
	mustCall(t, p.Get(key(1)), true)
	mustCall(t, p.Get(key(2)), true)
	scrape(t, p.reg) // two shown, one summed: the cap is full
	if p.SeriesShown(key(3)) {
		t.Fatal("a new key is shown while the cap is full")
	}
}

// Namespaces are the submitters' free text: summed series exist per
// namespace only for namespaces that also have a breaker with series of
// its own, the rest are summed under namespace "_other", and a sum left
// with no breaker is dropped. Before, 5,000 namespaces of one call each
// kept 5,000 summed series sets, after their breakers were evicted too.
func TestSummedSeriesBoundedByNamespaces(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{SeriesLimit: func() int { return 10 }, IdleTTL: testTTL, EvictInterval: time.Hour})
	for i := range 2000 {
		mustCall(t, p.Get(Key{TaskGroup: TaskGroupCallback, NamespaceID: fmt.Sprint("ns-", i), Destination: "http://h"}), true)
	}
	namespaces := func() map[string]bool {
		mfs, err := p.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "namespace" {
						out[l.GetValue()] = true
					}
				}
			}
		}
		return out
	}
	before := scrape(t, p.reg)["fusebox_breaker_requests_total{_other}"]
	if n := len(namespaces()); n > 11 {
		t.Fatalf("%d namespaces in the series with a limit of 10, want at most 11 (10 and _other)", n)
	}
	if !namespaces()[SeriesOther] {
		t.Fatal("no namespace _other: the summed breakers are not summed there")
	}
	for range 3 {
		mustCall(t, p.Get(Key{TaskGroup: TaskGroupCallback, NamespaceID: "ns-1999", Destination: "http://h"}), true)
	}
	if got := scrape(t, p.reg)["fusebox_breaker_requests_total{_other}"]; got < before {
		t.Fatalf("_other went down: %v after %v", got, before)
	}
	sweepIdle(p)
	if ns := namespaces(); len(ns) != 0 {
		t.Errorf("series for namespaces %v after every breaker was evicted", ns)
	}
}
