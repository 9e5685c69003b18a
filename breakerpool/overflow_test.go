package breakerpool

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sony/gobreaker/v2"

	"fusebox/internal/testwait"
)

// A burst of transitions far beyond the observer's queue reaches it: every
// breaker's latest, in order per breaker. A full queue dropped them: with
// a queue of 2 and a stuck observer, 98 of 100 openings were never seen
// (the hint policy's self-suspicion, fed by them, counted two opens where
// a hundred destinations had failed), nor the closes that followed.
func TestBurstBeyondTheObserverQueueIsDelivered(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	var mu sync.Mutex
	last := map[Key]Transition{}
	var order []string // "key from→to", as delivered
	observe := func(tr Transition) {
		<-release
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := last[tr.Key]; ok && tr.Generation < prev.Generation {
			t.Errorf("%s: generation %d delivered after %d", tr.Key, tr.Generation, prev.Generation)
		}
		last[tr.Key] = tr
		order = append(order, fmt.Sprintf("%s %v→%v", tr.Key.Destination, tr.From, tr.To))
	}
	p := newTestPool(t, fastSettings(), Config{ObserverQueue: 2, Observer: observe})
	const n = 100
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{TaskGroup: TaskGroupCallback, NamespaceID: "ns", Destination: fmt.Sprintf("https://d%03d.example", i)}
		p.Get(keys[i]).OpenFor(time.Hour, SourceLocal)
	}
	for _, k := range keys[:10] { // closed again while their opening waits
		b, _ := p.Lookup(k)
		b.ForceClosed(SourceOperator)
	}
	once.Do(func() { close(release) })
	testwait.For(t, 10*time.Second, "every breaker's latest transition delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(last) != n {
			return false
		}
		for i, k := range keys {
			want := gobreaker.StateOpen
			if i < 10 {
				want = gobreaker.StateClosed
			}
			if last[k].To != want {
				return false
			}
		}
		return true
	})
	// Every event was delivered or replaced by a later one of its breaker
	// (counted as dropped): the openings of the closed breakers after the
	// few that went through the queue (2, or 3 once the observer holds one).
	d := int(testutil.ToFloat64(p.dropped))
	mu.Lock()
	delivered := len(order)
	mu.Unlock()
	if d < 7 || d > 8 || delivered+d != n+10 {
		t.Fatalf("%d events delivered and %d dropped for %d, want 7 or 8 dropped and the rest delivered", delivered, d, n+10)
	}
}
