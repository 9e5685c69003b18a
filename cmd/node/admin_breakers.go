package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

func breakersCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "breakers",
		Short: "Show breakers (state and where it came from) and force keys open or closed cluster-wide",
	}
	var cluster bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List this node's breakers, or every node's with --cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				l, err := c.Breakers(ctx, cluster)
				return l, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "NODE\tTASK GROUP\tNAMESPACE\tDESTINATION\tSTATE\tSOURCE\tMODE\tOPEN FOR\tCONSEC. FAILURES\tGEN")
					for _, b := range l.Breakers {
						open := "-"
						if b.OpenRemainingSeconds > 0 {
							open = (time.Duration(b.OpenRemainingSeconds * float64(time.Second))).Round(time.Second).String()
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", orDash(b.Node), b.TaskGroup, orDash(b.Namespace), b.Destination,
							b.State, b.Source, b.Mode, open, b.Counts.ConsecutiveFailures, b.Generation)
					}
					if len(l.Unreachable) > 0 {
						fmt.Fprintf(tw, "\nunreachable: %v\n", l.Unreachable)
					}
				}, err
			})
		},
	}
	list.Flags().BoolVar(&cluster, "cluster", false, "ask every alive node and merge their breakers")

	var f api.BreakerForce
	force := &cobra.Command{
		Use:   "force open|closed|auto",
		Short: "Force a breaker key open or closed on every node, or give it back to automatic (stored in Raft)",
		Example: `  fusebox admin breakers force open --task-group nexusoperations.Invocation --namespace ns-1 --destination my-endpoint --duration 10m --reason "vendor maintenance"
  fusebox admin breakers force auto --task-group nexusoperations.Invocation --namespace ns-1 --destination my-endpoint`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"open", "closed", "auto"},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.Mode = args[0]
			names := fieldNamer{cmd: cmd, fields: forceFields} // admin_flags.go
			if err := checkForce(names, f); err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				// The nodes' breakers before the force (after it, the force
				// itself makes the key); an error here leaves the warning out:
				// the force reports an unreachable node itself.
				before, lerr := c.Breakers(ctx, true)
				fb, err := c.ForceBreaker(ctx, f)
				if err == nil && lerr == nil {
					warnUnseenKey(before, fb, cmd.ErrOrStderr()) // admin_breakers_keys.go
				}
				return fb, func(tw *tabwriter.Writer) {
					until := "until cleared"
					if !fb.Until.IsZero() {
						until = "until " + fb.Until.Format(time.RFC3339)
					}
					if fb.Mode == "auto" {
						until = ""
					}
					fmt.Fprintf(tw, "%s/%s/%s forced %s %s at raft index %d\n", fb.TaskGroup, fb.Namespace, fb.Destination, fb.Mode, until, fb.Index)
				}, flagNamed(err, names)
			})
		},
	}
	fl := force.Flags()
	fl.StringVar(&f.TaskGroup, "task-group", "", "nexusoperations.Invocation, nexusoperations.Cancelation or callbacks.Invocation")
	fl.StringVar(&f.Namespace, "namespace", "", "namespace id of the breaker key")
	fl.StringVar(&f.Destination, "destination", "", "endpoint name or callback URL of the breaker key")
	fl.StringVar(&f.Duration, "duration", "", "with open: how long (e.g. 10m); empty keeps it open until forced auto")
	fl.StringVar(&f.Reason, "reason", "", "why, recorded in the config history")

	forced := &cobra.Command{
		Use:   "forced",
		Short: "List the keys an operator forced",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				fs, err := c.ForcedBreakers(ctx)
				return fs, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "TASK GROUP\tNAMESPACE\tDESTINATION\tMODE\tUNTIL\tREASON\tAUTHOR\tINDEX")
					for _, b := range fs {
						until := "until cleared"
						if !b.Until.IsZero() {
							until = b.Until.Format(time.RFC3339)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", b.TaskGroup, orDash(b.Namespace), b.Destination, b.Mode, until,
							orDash(b.Reason), orDash(b.Author), b.Index)
					}
				}, err
			})
		},
	}
	cmd.AddCommand(list, force, forced)
	return cmd
}
