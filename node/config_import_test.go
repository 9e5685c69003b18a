package node

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
)

// A Temporal dynamic-config file imported through the API of a follower:
// the dry run writes nothing; the import is one Raft entry applied on every
// node, live (a breaker picks up the file's settings); unknown keys are
// reported and not applied; a file with one bad value is refused whole,
// naming the key, the index and the line.
func TestConfigImportTemporalFile(t *testing.T) {
	good, err := os.ReadFile("../dynconfig/testdata/temporal-dynamicconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := os.ReadFile("../dynconfig/testdata/temporal-dynamicconfig-bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, 3, nil)
	for _, n := range c.nodes {
		n.pool.Get(testKey) // a live breaker with default settings
	}
	leader := c.leader(c.nodes)
	follower := others(c.nodes, leader)[0]
	cl := follower.client()
	before := leader.store.Stats().LastIndex

	dry, err := cl.ConfigImport(ctxT(t), good, true)
	if err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.Index != 0 || len(dry.Set) != 11 || len(dry.Deleted) != 0 || len(dry.Unknown) != 3 || len(dry.Keys) != 9 {
		t.Fatalf("dry run = %+v", dry)
	}
	if got := leader.store.Stats().LastIndex; got != before {
		t.Fatalf("the dry run wrote: last index %d → %d", before, got)
	}

	res, err := cl.ConfigImport(ctxT(t), good, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Index == 0 || len(res.Set) != 11 || res.Unknown[0].Name != "limit.maxIDLength" {
		t.Fatalf("import = %+v", res)
	}
	for _, s := range res.Set {
		if s.Index != res.Index {
			t.Fatalf("value %+v not written at the import's index %d: not one entry", s, res.Index)
		}
	}
	for _, n := range c.nodes {
		testwait.For(t, 10*time.Second, n.cfg.NodeID+" applies the import", func() bool {
			return len(n.store.Reader().Config()) == 11
		})
		// history.outboundQueue.circuitBreakerSettings {maxRequests: 2,
		// timeout: 45}: Temporal's spelling, applied live.
		testwait.For(t, 10*time.Second, n.cfg.NodeID+" breaker settings from the file", func() bool {
			s := n.pool.Get(testKey).Settings()
			return s.Timeout.D() == 45*time.Second && s.MaxRequests == 2
		})
	}
	for _, k := range []string{"limit.maxIDLength", "frontend.workerVersioningDataAPIs"} {
		if dynconfig.IsKey(k) {
			t.Fatalf("%s is registered; the test wants it unknown", k)
		}
	}
	hist, err := cl.ConfigHistory(ctxT(t), 1)
	if err != nil || len(hist) != 1 || hist[0].Op != "import" || hist[0].Index != res.Index {
		t.Fatalf("history = %+v, %v", hist, err)
	}

	// The same file again changes nothing.
	again, err := cl.ConfigImport(ctxT(t), good, false)
	if err != nil || len(again.Set) != 0 || again.Unchanged != 11 {
		t.Fatalf("re-import = %+v, %v", again, err)
	}

	// One bad value refuses the whole file.
	mid := leader.store.Stats().LastIndex
	_, err = cl.ConfigImport(ctxT(t), bad, false)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Key != dynconfig.KeyCallbackRetryInitialInterval ||
		apiErr.Field != "[1]" || !strings.Contains(apiErr.Message, "line 6") {
		t.Fatalf("bad file: err = %#v", err)
	}
	if got := leader.store.Stats().LastIndex; got != mid {
		t.Fatalf("a refused file wrote: last index %d → %d", mid, got)
	}
	if _, ok := leader.store.Reader().ConfigEntry(dynconfig.KeyGroupLimiterConcurrency, "", ""); ok {
		t.Fatal("a value of the refused file was applied")
	}
}
