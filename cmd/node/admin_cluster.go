package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"fusebox/api"
)

func membersCmd(o *adminOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members, their gossip state and Raft role",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				ms, err := c.Members(ctx)
				return ms, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "ID\tSTATE\tRAFT\tLEADER\tHTTP\tGOSSIP\tRAFT ADDR\tSUSPECT")
					for _, m := range ms {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.State, m.RaftRole, yesNo(m.Leader),
							orDash(m.HTTPAddr), orDash(m.GossipAddr), orDash(m.RaftAddr), yesNo(m.Suspect))
					}
				}, err
			})
		},
	}
}

func raftCmd(o *adminOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "raft",
		Short: "Show the Raft configuration, leader and indexes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				info, err := c.Raft(ctx)
				return info, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "node %s is %s; leader %s (%s); term %d; last index %d, applied %d",
						info.NodeID, info.State, orDash(info.Leader), orDash(info.LeaderAddr), info.Term, info.LastIndex, info.AppliedIndex)
					if info.LogStore != "" {
						fmt.Fprintf(tw, "; log store %s", info.LogStore)
					}
					fmt.Fprint(tw, "\n\n")
					fmt.Fprintln(tw, "ID\tADDRESS\tSUFFRAGE\tLEADER")
					for _, s := range info.Servers {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, s.Address, s.Suffrage, yesNo(s.Leader))
					}
					if info.LogVersion > 0 {
						fmt.Fprintf(tw, "\ncluster log version %d", info.LogVersion)
						if len(info.LogVersionBehind) > 0 {
							fmt.Fprintf(tw, "; behind this node's build: %s", strings.Join(info.LogVersionBehind, ", "))
						}
						fmt.Fprintln(tw)
					}
				}, err
			})
		},
	}
}
