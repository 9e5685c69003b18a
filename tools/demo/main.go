// Command demo starts a fusebox cluster on loopback — by default 3 nodes,
// two Nexus destinations (healthy, and flaky, which refuses connections for
// 30 s and comes back) and a steady workload — and shows a live view every
// second: nodes and Raft roles, shards per node, every breaker per node with
// where its state came from, deliveries per destination, and what the flaky
// destination's outage cost beside an estimate of what per-host breakers
// would have cost. Ctrl-C (or --duration) tears everything down and prints
// a summary. `make demo` runs it; `go run ./tools/demo --help` lists the
// knobs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop() // also ends the goroutine below
	go func() {
		// After the first signal, a second one gets Go's default: the demo
		// dies at once and the kernel kills the nodes (Pdeathsig).
		<-ctx.Done()
		stop()
	}()
	tty := !cfg.Plain && isTerminal(os.Stdout)
	sum, err := run(ctx, cfg, os.Stdout, tty)
	if sum != nil {
		fmt.Print(sum.String())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	if sum != nil && len(sum.LeftRunning) > 0 {
		os.Exit(1)
	}
}
