// Command fusebox runs a fusebox node (`fusebox serve`) and administers a
// running cluster (`fusebox admin …`).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is stamped by the linker (-X main.version=…) in release builds.
var version = "dev"

func main() {
	// Signals become a context: the first SIGINT/SIGTERM starts a graceful
	// shutdown; a second one kills the process (the default handler is
	// restored as soon as the context is done).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := usageExit(rootCmd().ExecuteContext(ctx))
	stop()
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "fusebox:", ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "fusebox:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "fusebox",
		Short: "fusebox delivers outbound calls through circuit breakers the whole fleet shares",
		Long: `fusebox is a cluster of nodes that deliver outbound calls (Nexus start and
cancel operations, completion callbacks) to destinations nobody in the fleet
controls. Each destination sits behind a circuit breaker; when one node's
breaker trips, the trip is gossiped to every peer so the fleet stops calling a
dead destination after a handful of calls, and recovery spreads the same way.
Cluster state (dynamic config, endpoints, shard map) is replicated with Raft.
Tasks live in the same Raft store by default (no outside database), or in
PostgreSQL for clusters that outgrow one Raft group (serve --task-store
postgres).

Start a single node on loopback:   fusebox serve
Talk to it:                        fusebox admin members
                                   fusebox admin breakers list --cluster
                                   open http://127.0.0.1:8470/ui/`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), adminCmd(), tlsCmd(), versionCmd())
	markUsageErrors(root) // bad usage exits 2 (version.go)
	return root
}
