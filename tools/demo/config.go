package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"fusebox/breakerpool"
)

// Config is one demo run. The zero value is not valid: start from
// DefaultConfig (or parseFlags) and Validate before use.
type Config struct {
	// Bin is the fusebox binary; "" builds bin/fusebox in the module root.
	Bin string
	// Nodes is the cluster size (bootstrap-expect).
	Nodes int
	// Duration bounds the workload phase; 0 runs until Ctrl-C.
	Duration time.Duration
	// Rate is tasks per second submitted for each destination.
	Rate float64
	// OutageAt is when (from the workload start) flaky goes down, and
	// OutageFor how long it stays down; OutageFor 0 means no outage.
	OutageAt  time.Duration
	OutageFor time.Duration
	// OutageMode is how flaky fails: refuse (connections refused) or
	// unavailable (every request answered 503).
	OutageMode string
	// BreakerTimeout is the breaker Timeout set cluster-wide for the demo
	// (the default, 60 s, makes a dull demo).
	BreakerTimeout time.Duration
	// HintPolicy, when set, is written to fusebox.breaker.hintPolicy
	// (probe, adopt or off); "" keeps the cluster default (confirm).
	HintPolicy string
	// Refresh is the live view's period.
	Refresh time.Duration
	// ReadyTimeout bounds the wait for every node's /readyz.
	ReadyTimeout time.Duration
	// StopTimeout is how long a node may take to exit after SIGTERM
	// before it is killed.
	StopTimeout time.Duration
	// Keep leaves the temp dir (data, logs) in place.
	Keep bool
	// Plain prints one line per refresh instead of redrawing the screen.
	// It is forced when stdout is not a terminal.
	Plain bool
	// Dir, when set, is used instead of a fresh temp dir (tests).
	Dir string
	// Secure runs the cluster as on a real network: HTTPS API, mutual TLS
	// Raft and forwarding from a demo CA, named API tokens, gossip
	// encryption (docs/security.md).
	Secure bool
	// TaskStore is the nodes' --task-store: raft (default) or postgres
	// (a throwaway PostgreSQL server started for the run, postgres.go).
	TaskStore string
	// ThrottleAt is when (from the workload start) flaky starts answering
	// 429 with "Retry-After: RetryAfter" (whole seconds), for RetryAfter;
	// RetryAfter 0 means no such phase (fleet.go).
	ThrottleAt time.Duration
	RetryAfter time.Duration
	// FleetRPS is fusebox.destination.fleetRPS set on healthy (0: none).
	FleetRPS float64
	// HealthInterval is the interval of flaky's active health check
	// (0: flaky is registered without one).
	HealthInterval time.Duration
}

// DefaultConfig is the configuration `make demo` starts from.
func DefaultConfig() Config {
	return Config{
		Nodes:          3,
		Rate:           20,
		OutageAt:       10 * time.Second,
		OutageFor:      30 * time.Second,
		OutageMode:     outageRefuse,
		BreakerTimeout: 5 * time.Second,
		Refresh:        time.Second,
		ReadyTimeout:   60 * time.Second,
		StopTimeout:    15 * time.Second,
		TaskStore:      taskStoreRaft,
		ThrottleAt:     50 * time.Second,
		RetryAfter:     8 * time.Second,
		FleetRPS:       15,
		HealthInterval: time.Second,
	}
}

// Outage modes.
const (
	outageRefuse      = "refuse"
	outageUnavailable = "unavailable"
)

// Limits of the knobs: a demo on one host, not a load test.
const (
	maxNodes = 7
	maxRate  = 500
	// maxRetryAfter stays under fusebox.breaker.maxRetryAfter's default
	// (10m), which caps the hold.
	maxRetryAfter = 10 * time.Minute
	maxFleetRPS   = 1_000_000 // the key's own bound
)

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > maxNodes:
		return fmt.Errorf("--nodes: %d is not in [1, %d]", c.Nodes, maxNodes)
	case c.Duration < 0:
		return errors.New("--duration: must not be negative")
	case !(c.Rate > 0 && c.Rate <= maxRate):
		return fmt.Errorf("--rate: %v is not in (0, %d] tasks/s", c.Rate, maxRate)
	case c.OutageAt < 0:
		return errors.New("--outage-at: must not be negative")
	case c.OutageFor < 0:
		return errors.New("--outage-for: must not be negative")
	case c.OutageMode != outageRefuse && c.OutageMode != outageUnavailable:
		return fmt.Errorf("--outage-mode: %q is not refuse or unavailable", c.OutageMode)
	case c.BreakerTimeout <= 0:
		return errors.New("--breaker-timeout: must be positive")
	case c.Refresh < 100*time.Millisecond:
		return fmt.Errorf("--refresh: %v is below 100ms", c.Refresh)
	case c.ReadyTimeout <= 0:
		return errors.New("--ready-timeout: must be positive")
	case c.StopTimeout <= 0:
		return errors.New("--stop-timeout: must be positive")
	case c.TaskStore != taskStoreRaft && c.TaskStore != taskStorePostgres:
		return fmt.Errorf("--task-store: %q is not raft or postgres", c.TaskStore)
	case c.RetryAfter < 0 || c.RetryAfter > maxRetryAfter || c.RetryAfter%time.Second != 0:
		return fmt.Errorf("--retry-after: %v is not whole seconds in [0, %v]", c.RetryAfter, maxRetryAfter)
	case c.ThrottleAt < 0:
		return errors.New("--throttle-at: must not be negative")
	case c.RetryAfter > 0 && c.OutageFor > 0 && c.ThrottleAt < c.OutageAt+c.OutageFor && c.ThrottleAt+c.RetryAfter > c.OutageAt:
		return fmt.Errorf("--throttle-at: the 429 phase [%v, %v) overlaps the outage [%v, %v)",
			c.ThrottleAt, c.ThrottleAt+c.RetryAfter, c.OutageAt, c.OutageAt+c.OutageFor)
	case !(c.FleetRPS >= 0 && c.FleetRPS <= maxFleetRPS):
		return fmt.Errorf("--fleet-rps: %v is not in [0, %d]", c.FleetRPS, maxFleetRPS)
	case c.HealthInterval != 0 && (c.HealthInterval < 100*time.Millisecond || c.HealthInterval > time.Hour):
		return fmt.Errorf("--health-interval: %v is not 0 or in [100ms, 1h]", c.HealthInterval)
	}
	switch breakerpool.HintPolicy(c.HintPolicy) {
	case "", breakerpool.HintProbe, breakerpool.HintAdopt, breakerpool.HintOff, breakerpool.HintConfirm:
	default:
		return fmt.Errorf("--hint-policy: %q is not confirm, probe, adopt or off", c.HintPolicy)
	}
	return nil
}

// parseFlags reads args into a Config on top of DefaultConfig.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: go run ./tools/demo [flags]

Starts a fusebox cluster on loopback, two destinations (healthy, and flaky
which goes down for a while and comes back) and a steady workload, and shows
a live view every second. Later flaky answers 429 with a Retry-After for a
while (the fleet holds it until that deadline); healthy has a fleet-wide rate
budget; flaky has an active health check. Ctrl-C (or --duration) tears
everything down and prints a summary.

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Bin, "bin", c.Bin, "fusebox binary to run (default: build bin/fusebox in the module root)")
	fs.IntVar(&c.Nodes, "nodes", c.Nodes, "cluster size")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long the workload runs before the demo stops by itself (0: until Ctrl-C)")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "tasks per second submitted for each destination")
	fs.DurationVar(&c.OutageAt, "outage-at", c.OutageAt, "when flaky goes down, from the workload start")
	fs.DurationVar(&c.OutageFor, "outage-for", c.OutageFor, "how long flaky stays down (0: no outage)")
	fs.StringVar(&c.OutageMode, "outage-mode", c.OutageMode, "how flaky fails: refuse (connection refused) or unavailable (HTTP 503)")
	fs.DurationVar(&c.BreakerTimeout, "breaker-timeout", c.BreakerTimeout, "breaker Timeout set cluster-wide for the demo (fusebox default: 60s)")
	fs.StringVar(&c.HintPolicy, "hint-policy", c.HintPolicy, "fusebox.breaker.hintPolicy to set: confirm, probe, adopt or off (default: leave the cluster default)")
	fs.BoolVar(&c.Secure, "secure", c.Secure, "run the cluster with TLS (HTTPS API, mutual-TLS Raft), named API tokens and gossip encryption, from a CA made for the run")
	fs.StringVar(&c.TaskStore, "task-store", c.TaskStore, "where the nodes keep tasks: raft, or postgres (starts a throwaway PostgreSQL server for the run; needs its binaries: make pg-tools)")
	fs.DurationVar(&c.ThrottleAt, "throttle-at", c.ThrottleAt, "when flaky starts answering 429 with Retry-After, from the workload start (it must not overlap the outage)")
	fs.DurationVar(&c.RetryAfter, "retry-after", c.RetryAfter, "the Retry-After flaky sends (whole seconds), which is also how long it answers 429 (0: no 429 phase)")
	fs.Float64Var(&c.FleetRPS, "fleet-rps", c.FleetRPS, "fusebox.destination.fleetRPS set on healthy: calls/s for the whole fleet (0: no fleet budget)")
	fs.DurationVar(&c.HealthInterval, "health-interval", c.HealthInterval, "interval of flaky's active health check, GET /health on its server (0: no health check)")
	fs.DurationVar(&c.Refresh, "refresh", c.Refresh, "live view refresh period")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", c.ReadyTimeout, "how long the nodes may take to become ready")
	fs.DurationVar(&c.StopTimeout, "stop-timeout", c.StopTimeout, "how long a node may take to exit after SIGTERM before it is killed")
	fs.BoolVar(&c.Keep, "keep", c.Keep, "keep the temp dir (node data and logs) after the demo")
	fs.BoolVar(&c.Plain, "plain", c.Plain, "one line per refresh instead of redrawing the screen (forced when stdout is not a terminal)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return c, c.Validate()
}
