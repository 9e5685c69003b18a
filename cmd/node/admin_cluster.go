package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

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
					fmt.Fprintln(tw, "ID\tSTATE\tRAFT\tLEADER\tHTTP\tGOSSIP\tRAFT ADDR\tSUSPECT\tTASK STORE")
					for _, m := range ms {
						store := "-"
						if m.TaskStoreUnreachable {
							store = "unreachable"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.State, m.RaftRole, yesNo(m.Leader),
							orDash(m.HTTPAddr), orDash(m.GossipAddr), orDash(m.RaftAddr), yesNo(m.Suspect), store)
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
					fmt.Fprintln(tw, "ID\tADDRESS\tSUFFRAGE\tLEADER\tHEARTBEATS")
					for _, s := range info.Servers {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.Address, s.Suffrage, yesNo(s.Leader), heartbeats(info, s))
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

// heartbeats is the HEARTBEATS column of admin raft: the leader's view of
// its heartbeats to s ("-" when the node answering does not lead: only the
// leader sends them).
func heartbeats(info api.RaftInfo, s api.RaftServer) string {
	switch {
	case info.State != "Leader":
		return "-"
	case s.ID == info.NodeID:
		return "self"
	case s.HeartbeatsFailingSince != nil:
		return "failing since " + s.HeartbeatsFailingSince.UTC().Format(time.RFC3339)
	default:
		return "ok"
	}
}
