package raftstore

import (
	"errors"
	"testing"
	"time"

	"fusebox/raftstore/state"
)

// The proposer validates and canonicalises the health check.
func TestPutEndpointHealthValidatedOnProposer(t *testing.T) {
	c := newTestCluster(t, nil)
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	_, err := s.PutEndpoint(t.Context(), state.PutEndpointCommand{Name: "ep", URL: "http://127.0.0.1:1/x", Health: &state.EndpointHealth{URL: "http://127.0.0.1:1/h", HealthyStatus: 700}})
	var re *state.Error
	if !errors.As(err, &re) || re.Field != "health.healthy_status" {
		t.Fatalf("err = %v, want a health.healthy_status error", err)
	}
	e, err := s.PutEndpoint(t.Context(), state.PutEndpointCommand{Name: "ep", URL: "http://127.0.0.1:1/x", Health: &state.EndpointHealth{URL: "http://127.0.0.1:1/h", Interval: "3s"}})
	if err != nil {
		t.Fatal(err)
	}
	if e.Health == nil || e.Health.Interval != "3s" || e.Health.Timeout != "2s" || e.Health.HealthyStatus != 200 {
		t.Fatalf("stored %+v", e.Health)
	}
}
