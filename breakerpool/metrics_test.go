package breakerpool

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
)

func TestMetricValues(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	mustCall(t, b, true)
	trip(t, b) // 6 failures, then one rejection inside trip
	e := NewCircuitBreakerExecutable(b, ExecutableFunc(func(context.Context) error { return nil }))
	_ = e.Execute(context.Background()) // blocked + rejected
	testwait.For(t, 5*time.Second, "the condition", func() bool { return b.State() == half })
	mustCall(t, b, true) // probe closes it
	mustCall(t, b, false)
	mustCall(t, p.Get(keyB), true)

	const labels = `destination="endpoint-a",namespace="ns1",task_group="nexusoperations.Invocation"`
	const labelsB = `destination="endpoint-b",namespace="ns1",task_group="nexusoperations.Invocation"`
	want := `
# HELP fusebox_breaker_state Effective breaker state: 0 closed, 1 half-open, 2 open.
# TYPE fusebox_breaker_state gauge
fusebox_breaker_state{` + labels + `} 0
fusebox_breaker_state{` + labelsB + `} 0
# HELP fusebox_breaker_consecutive_failures Consecutive failures counted in the current generation.
# TYPE fusebox_breaker_consecutive_failures gauge
fusebox_breaker_consecutive_failures{` + labels + `} 1
fusebox_breaker_consecutive_failures{` + labelsB + `} 0
# HELP fusebox_breaker_requests_total Calls by outcome: success, failure (destination down), rejected.
# TYPE fusebox_breaker_requests_total counter
fusebox_breaker_requests_total{destination="endpoint-a",namespace="ns1",outcome="failure",task_group="nexusoperations.Invocation"} 7
fusebox_breaker_requests_total{destination="endpoint-a",namespace="ns1",outcome="rejected",task_group="nexusoperations.Invocation"} 2
fusebox_breaker_requests_total{destination="endpoint-a",namespace="ns1",outcome="success",task_group="nexusoperations.Invocation"} 2
fusebox_breaker_requests_total{destination="endpoint-b",namespace="ns1",outcome="failure",task_group="nexusoperations.Invocation"} 0
fusebox_breaker_requests_total{destination="endpoint-b",namespace="ns1",outcome="rejected",task_group="nexusoperations.Invocation"} 0
fusebox_breaker_requests_total{destination="endpoint-b",namespace="ns1",outcome="success",task_group="nexusoperations.Invocation"} 1
# HELP fusebox_breaker_transitions_total Effective breaker state transitions.
# TYPE fusebox_breaker_transitions_total counter
fusebox_breaker_transitions_total{destination="endpoint-a",from="closed",namespace="ns1",task_group="nexusoperations.Invocation",to="open"} 1
fusebox_breaker_transitions_total{destination="endpoint-a",from="half-open",namespace="ns1",task_group="nexusoperations.Invocation",to="closed"} 1
fusebox_breaker_transitions_total{destination="endpoint-a",from="open",namespace="ns1",task_group="nexusoperations.Invocation",to="half-open"} 1
# HELP fusebox_circuit_breaker_executable_blocked_total Tasks the CircuitBreakerExecutable rejected because the breaker would not admit them.
# TYPE fusebox_circuit_breaker_executable_blocked_total counter
fusebox_circuit_breaker_executable_blocked_total{` + labels + `} 1
fusebox_circuit_breaker_executable_blocked_total{` + labelsB + `} 0
# HELP fusebox_breakers Breakers currently in the pool.
# TYPE fusebox_breakers gauge
fusebox_breakers 2
`
	if err := testutil.GatherAndCompare(p.reg, strings.NewReader(want),
		"fusebox_breaker_state", "fusebox_breaker_consecutive_failures", "fusebox_breaker_requests_total",
		"fusebox_breaker_transitions_total", "fusebox_circuit_breaker_executable_blocked_total", "fusebox_breakers"); err != nil {
		t.Fatal(err)
	}

	b.OpenFor(time.Hour, SourceOperator)
	const open = `
# HELP fusebox_breaker_state Effective breaker state: 0 closed, 1 half-open, 2 open.
# TYPE fusebox_breaker_state gauge
fusebox_breaker_state{` + labels + `} 2
fusebox_breaker_state{` + labelsB + `} 0
`
	if err := testutil.GatherAndCompare(p.reg, strings.NewReader(open), "fusebox_breaker_state"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(p.reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}
