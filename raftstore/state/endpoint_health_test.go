package state

import (
	"bytes"
	"testing"
)

func TestValidateEndpointHealth(t *testing.T) {
	got, err := ValidateEndpointHealth(EndpointHealth{URL: "http://127.0.0.1:9/healthz"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (EndpointHealth{URL: "http://127.0.0.1:9/healthz", Interval: "10s", Timeout: "2s", HealthyStatus: 200}); got != want {
		t.Fatalf("canonical = %+v, want %+v", got, want)
	}
	got, err = ValidateEndpointHealth(EndpointHealth{URL: "https://h/x", Interval: "500ms", HealthyStatus: 204})
	if err != nil {
		t.Fatal(err)
	}
	if got.Timeout != "500ms" || got.Interval != "500ms" || got.HealthyStatus != 204 {
		t.Fatalf("timeout defaults to at most the interval: %+v", got)
	}
	if i, to := got.Durations(); i.String() != "500ms" || to.String() != "500ms" {
		t.Fatalf("durations %v %v", i, to)
	}
	for _, c := range []struct {
		h     EndpointHealth
		field string
	}{
		{EndpointHealth{URL: ""}, "health.url"},
		{EndpointHealth{URL: "ftp://h/x"}, "health.url"},
		{EndpointHealth{URL: "http:///x"}, "health.url"},
		{EndpointHealth{URL: "http://u:p@h/x"}, "health.url"},
		{EndpointHealth{URL: "http://h/x", Interval: "soon"}, "health.interval"},
		{EndpointHealth{URL: "http://h/x", Interval: "1ms"}, "health.interval"},
		{EndpointHealth{URL: "http://h/x", Interval: "2h"}, "health.interval"},
		{EndpointHealth{URL: "http://h/x", Timeout: "x"}, "health.timeout"},
		{EndpointHealth{URL: "http://h/x", Timeout: "1ms"}, "health.timeout"},
		{EndpointHealth{URL: "http://h/x", Interval: "1s", Timeout: "2s"}, "health.timeout"},
		{EndpointHealth{URL: "http://h/x", HealthyStatus: 99}, "health.healthy_status"},
		{EndpointHealth{URL: "http://h/x", HealthyStatus: 600}, "health.healthy_status"},
	} {
		_, err := ValidateEndpointHealth(c.h)
		if err == nil || err.Field != c.field || err.Code != CodeInvalidArgument {
			t.Errorf("%+v: err %v, want field %s", c.h, err, c.field)
		}
	}
}

// An endpoint's health check is applied, read back and survives a
// snapshot; a put_endpoint entry without it (every entry written before it
// existed, pinned by the golden type03 entry) still applies as before.
func TestEndpointHealthApplyAndSnapshot(t *testing.T) {
	f := newTestFSM(t, StateOptions{})
	h := &EndpointHealth{URL: "http://127.0.0.1:1/healthz", Interval: "1s", Timeout: "200ms", HealthyStatus: 200}
	mustOK(t, applyCmd(t, f, 1, MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: "ep", URL: "http://127.0.0.1:1/x", Health: h}, ""))
	mustOK(t, applyCmd(t, f, 2, MsgPutEndpoint, PutEndpointCommand{CommandMeta: meta0, Name: "plain", URL: "http://127.0.0.1:1/y"}, ""))
	e, ok := f.State().Endpoint("ep")
	if !ok || e.Health == nil || *e.Health != *h {
		t.Fatalf("endpoint %+v", e)
	}
	if p, _ := f.State().Endpoint("plain"); p.Health != nil {
		t.Fatalf("plain endpoint has a health check: %+v", p.Health)
	}
	dst := newTestFSM(t, StateOptions{})
	if err := dst.Restore(bytes.NewReader(snapshotBytes(t, f))); err != nil {
		t.Fatal(err)
	}
	if e, _ := dst.State().Endpoint("ep"); e.Health == nil || *e.Health != *h {
		t.Fatalf("restored endpoint %+v", e)
	}
}
