package e2e

import (
	"context"
	"strings"
	"testing"

	"fusebox/api"
	"fusebox/transport/transporttest"
)

// TestWriterVerifyDetectsLossAndPhantoms checks the checker: on a one-node
// cluster, an acknowledged write deleted behind the writer's back, a value
// changed, and an entry the writer never sent must each make Verify fail.
func TestWriterVerifyDetectsLossAndPhantoms(t *testing.T) {
	c := NewCluster(t, 1, ClusterOptions{})
	requireClusterAPI(t, c.Procs[0])
	c.WaitForLeader(t, leaderTimeout)
	p := c.Procs[0]
	dest := transporttest.NewDestination(t)
	w := NewWriter(c, "ep-", dest.NexusURL())
	for range 5 {
		if !w.WriteOne(nil) {
			t.Fatalf("write refused: %v", w.Stats().LastErr)
		}
	}
	if missing, err := w.Verify(p); err != nil || missing != 0 {
		t.Fatalf("clean state: missing %d, %v", missing, err)
	}
	ctx := context.Background()
	cl := p.Client()

	if _, err := cl.DeleteEndpoint(ctx, "ep-2"); err != nil {
		t.Fatal(err)
	}
	if missing, err := w.Verify(p); err == nil || missing != 1 || !strings.Contains(err.Error(), "endpoint ep-2 missing") {
		t.Fatalf("deleted endpoint: missing %d, %v", missing, err)
	}
	if _, err := cl.PutEndpoint(ctx, api.Endpoint{Name: "ep-2", URL: dest.NexusURL()}); err != nil {
		t.Fatal(err)
	}

	if _, err := cl.ConfigSet(ctx, keyRPS, api.ConfigWrite{Destination: "ep-3", Value: []byte("999")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Verify(p); err == nil || !strings.Contains(err.Error(), "config for ep-3 = 999") {
		t.Fatalf("changed value: %v", err)
	}
	if _, err := cl.ConfigSet(ctx, keyRPS, api.ConfigWrite{Destination: "ep-3", Value: rpsValue(3)}); err != nil {
		t.Fatal(err)
	}

	if _, err := cl.PutEndpoint(ctx, api.Endpoint{Name: "ep-77", URL: dest.NexusURL()}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Verify(p); err == nil || !strings.Contains(err.Error(), "ep-77 present but never written") {
		t.Fatalf("phantom endpoint: %v", err)
	}
	if _, err := cl.DeleteEndpoint(ctx, "ep-77"); err != nil {
		t.Fatal(err)
	}
	if missing, err := w.Verify(p); err != nil || missing != 0 {
		t.Fatalf("repaired state: missing %d, %v", missing, err)
	}
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}
