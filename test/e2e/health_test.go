package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// TestTasksHealthCheckOutage (issue 19 §4) on three real processes: a Nexus
// endpoint with a health check (interval 500ms) whose destination goes
// down while tasks keep arriving. Once every node's breaker is open no task
// reaches the destination — only health checks do, for many breaker
// Timeouts (500ms) — and when it is back, delivery resumes: every task
// succeeds and every breaker closes.
func TestTasksHealthCheckOutage(t *testing.T) {
	c := newTaskCluster(t, 3)
	dest := NewDest(t)
	const ep, ns = "ep-health", "ns-health"
	p := c.Live()[0]
	if _, err := p.Client().PutEndpoint(context.Background(), api.Endpoint{Name: ep, URL: dest.NexusURL(),
		Health: &api.EndpointHealth{URL: dest.HealthURL(), Interval: "500ms", Timeout: "300ms"}}); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, "the endpoint's health check on every node", func() error {
		for _, q := range c.Live() {
			e, err := q.Client().Endpoint(context.Background(), ep)
			if err != nil {
				return fmt.Errorf("%s: %w", q.Name(), err)
			}
			if e.Health == nil {
				return fmt.Errorf("%s: no health check yet", q.Name())
			}
		}
		return nil
	})
	setConfig(t, c, keyBreaker, ep, `{"Timeout":"500ms","FailureThreshold":3}`)
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: ns, Destination: ep}
	l := NewTaskLoad(c, "health", func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(ns, fmt.Sprintf("wf-%d", i), ep, i), dest
	})
	l.Run(0, 2, 40*time.Millisecond)
	testwait.ForErr(t, convergeTimout, "a breaker for "+ep+" on every node", func() error {
		_, err := breakersEverywhere(c, key)
		return err
	})

	dest.SetMode(t, transporttest.ModeUnavailable)
	testwait.ForErr(t, convergeTimout, "every node's breaker open", breakersAllIn(c, key, "open"))
	// A call admitted just before the last breaker opened may arrive a
	// little later: it is not a probe.
	from := time.Now().Add(200 * time.Millisecond)
	testwait.ForErr(t, convergeTimout, "8 health checks (8 breaker Timeouts) after every breaker opened", func() error {
		if n := healthCalls(dest, from); n < 8 {
			return fmt.Errorf("%d health checks", n)
		}
		return nil
	})
	upAt := time.Now()
	tasks := 0
	for _, call := range dest.Calls() {
		if call.Path != "/health" && !call.Arrived.Before(from) && call.Arrived.Before(upAt) {
			tasks++
		}
	}
	bs, _, err := clusterBreakers(c.Procs[0], key)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, b := range bs {
		if b.Health != nil {
			checked++
			t.Logf("%s: last health check %s (%s, status %d) at %v", b.Node, b.Health.Result, b.Health.Role, b.Health.Status, b.Health.At.Format(time.StampMilli))
		}
	}
	t.Logf("while down for %v after every breaker opened: %d health checks, %d tasks reached the destination; breakers %s",
		upAt.Sub(from).Round(time.Millisecond), healthCalls(dest, from), tasks, breakerLine(bs))
	if tasks != 0 {
		t.Errorf("%d tasks were spent on the dead destination while every breaker was open, want 0", tasks)
	}
	if checked == 0 {
		t.Error("no node's breaker list shows a health check")
	}
	dest.SetMode(t, transporttest.ModeUp)
	rep := l.Check(t, convergeTimout)
	t.Logf("after recovery: %v", rep)
	testwait.ForErr(t, convergeTimout, "every node's breaker closed", func() error {
		bs, _, err := clusterBreakers(c.Procs[0], key)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if b.State != "closed" {
				return fmt.Errorf("breakers: %s", breakerLine(bs))
			}
		}
		return nil
	})
}

// healthCalls counts the health checks the destination got from `from` on.
func healthCalls(d *Dest, from time.Time) int {
	n := 0
	for _, c := range d.Calls() {
		if c.Path == "/health" && !c.Arrived.Before(from) {
			n++
		}
	}
	return n
}
