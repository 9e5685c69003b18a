package node

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// seriesDestinations returns the destination labels of family name in reg.
func seriesDestinations(t *testing.T, reg prometheus.Gatherer, name string) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "destination" {
					out[l.GetValue()] = true
				}
			}
		}
	}
	return out
}

// fusebox.metrics.destinationSeriesLimit reaches the pool live: at 0 a
// delivered callback's destination is summed under "_other" in the breaker
// and request series alike; at -1 it has series of its own again.
func TestDestinationSeriesLimitIsLive(t *testing.T) {
	dest := transporttest.NewDestination(t)
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	id, err := newSubmitter(t, c.nodes).submit(callbackTask(dest.CallbackURL(), "wf-series", "req-series"))
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the callback delivered", func() bool {
		tk, ok := n.store.Reader().Task(id)
		return ok && tk.Status == state.TaskSucceeded
	})
	host := transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())
	families := []string{"fusebox_breaker_requests_total", "fusebox_callback_outbound_requests_total"}
	for _, f := range families {
		if d := seriesDestinations(t, n.reg, f); !d[host] || d[breakerpool.SeriesOther] {
			t.Fatalf("default cap: %s destinations %v, want %s alone", f, d, host)
		}
	}

	setConfig(t, c.nodes, dynconfig.KeyMetricsDestinationSeriesLimit, "", "0")
	seriesDestinations(t, n.reg, families[0]) // the scrape that applies the cap
	for _, f := range families {
		if d := seriesDestinations(t, n.reg, f); d[host] {
			t.Errorf("cap 0: %s still has %s: %v", f, host, d)
		}
	}
	if d := seriesDestinations(t, n.reg, families[0]); !d[breakerpool.SeriesOther] {
		t.Errorf("cap 0: no _other breaker series: %v", d)
	}

	setConfig(t, c.nodes, dynconfig.KeyMetricsDestinationSeriesLimit, "", "-1")
	if d := seriesDestinations(t, n.reg, families[0]); !d[host] {
		t.Errorf("cap off: %s lacks %s: %v", families[0], host, d)
	}
}
