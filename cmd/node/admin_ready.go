package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

// waitReadyCmd is `fusebox admin wait-ready`: for scripts that start nodes
// and must not talk to them before they serve.
func waitReadyCmd(o *adminOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "wait-ready",
		Short: "Wait until the node at --addr is ready (its /readyz), bounded by --timeout",
		Long: `Poll the node at --addr until its /readyz says ready: joined the gossip
cluster, a Raft leader known and caught up, its shards placed. A node that
does not answer yet (still starting: connection refused) is waited for too.
Progress goes to stderr whenever the reason changes. Exit 0 when ready, 4
when --timeout passed first (the last reason is printed).

  fusebox admin wait-ready --addr 127.0.0.1:18470 --timeout 60s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			r, err := waitReady(ctx, c, func(why string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", c.Addr(), why)
			})
			if err != nil {
				return err
			}
			return o.print(cmd.OutOrStdout(), r, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s\tready\n", c.Addr())
			})
		},
	}
}

// waitReady polls c's /readyz every 200 ms until it is ready or ctx ends;
// progress sees each new reason for waiting.
func waitReady(ctx context.Context, c *api.Client, progress func(why string)) (api.Readiness, error) {
	last := ""
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := c.Ready(ctx)
		why := ""
		switch {
		case err == nil && r.Ready:
			return r, nil
		case err == nil:
			why = "not ready: " + notReadyReason(r.Detail)
		case errors.Is(err, syscall.ECONNREFUSED):
			why = "no answer yet (connection refused); waiting for the node to start"
		case ctx.Err() != nil:
		default:
			return r, apiExit(tlsHint(c.Addr(), err))
		}
		if why != "" && why != last {
			progress(why)
			last = why
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if last == "" {
				last = "no answer"
			}
			return r, &exitError{code: 4, msg: fmt.Sprintf("%s not ready after --timeout: %s", c.Addr(), last)}
		}
	}
}

// notReadyReason names the /readyz checks that fail (node.ready: the
// false booleans, no leader, nothing applied, the shards' explanation, a
// task store's error), in a stable order.
func notReadyReason(detail map[string]any) string {
	var parts []string
	for k, v := range detail {
		switch v := v.(type) {
		case bool:
			if !v && k != "egress_suspect" {
				parts = append(parts, k+"=false")
			}
		case string:
			switch {
			case k == "raft_leader" && v == "":
				parts = append(parts, "no raft leader known")
			case k == "shards" || strings.HasSuffix(k, "_detail") || strings.HasSuffix(k, "_error"):
				parts = append(parts, k+": "+v)
			}
		case float64:
			if k == "applied_index" && v == 0 {
				parts = append(parts, "nothing applied yet")
			}
		}
	}
	if len(parts) == 0 {
		return "no reason given"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
