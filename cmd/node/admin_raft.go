package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"fusebox/api"
)

// raftOpsCmds are the subcommands of `fusebox admin raft`.
func raftOpsCmds(o *adminOpts) []*cobra.Command {
	var to string
	transfer := &cobra.Command{
		Use:   "transfer-leader",
		Short: "Hand Raft leadership to another voter",
		Long: `Hand Raft leadership to the voter --to names (any other voter without --to),
for example before maintenance on the leader's host. Any node relays the call
to the leader. Refused: --to naming the leader itself, a non-voter or an unknown
server, and a cluster with one voter.`,
		Example: "  fusebox admin raft transfer-leader --to n2",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				res, err := c.TransferLeader(ctx, to)
				return res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "leadership moved from %s to %s\n", res.From, orDash(res.To))
				}, err
			})
		},
	}
	transfer.Flags().StringVar(&to, "to", "", "node id of the voter to hand leadership to (default: any other voter)")

	var force bool
	remove := &cobra.Command{
		Use:   "remove-peer ID",
		Short: "Remove a server from the Raft configuration",
		Long: `Remove server ID from the Raft configuration, through the leader.

Use it for a server that is dead or gone for good and that the leader has not
reaped yet. A server that is still alive in gossip comes back: the leader's
reconcile loop adds every alive member as a non-voter and promotes it, so stop
a live node (fusebox serve exits) before removing it, or it rejoins.

Refused without --force: removing the last voter, and removing a voter when
the live voters left would not be a quorum of the voters left (for example a
live voter of a 3-voter cluster in which another voter is down). Always
refused: removing the leader itself (transfer-leader first).`,
		Example: "  fusebox admin raft remove-peer n3",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				res, err := c.RemovePeer(ctx, args[0], force)
				return res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "removed %s (%s) from the raft configuration at index %d\n", res.ID, res.Suffrage, res.Index)
					if res.Note != "" {
						fmt.Fprintf(tw, "note: %s\n", res.Note)
					}
				}, err
			})
		},
	}
	remove.Flags().BoolVar(&force, "force", false, "remove even the last voter or a voter whose removal leaves fewer live voters than a quorum")
	return []*cobra.Command{transfer, remove}
}
