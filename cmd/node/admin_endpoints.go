package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"fusebox/api"
	"fusebox/transport"
)

func endpointsCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "endpoints",
		Short: "Manage the Nexus endpoint registry (name → target URL)",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List endpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				es, err := c.Endpoints(ctx)
				return es, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "NAME\tURL\tDESCRIPTION\tINDEX")
					for _, e := range es {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", e.Name, e.URL, orDash(e.Description), e.Index)
					}
				}, err
			})
		},
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one endpoint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				e, err := c.Endpoint(ctx, args[0])
				return e, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "name\t%s\nurl\t%s\ndescription\t%s\nindex\t%d\n", e.Name, e.URL, orDash(e.Description), e.Index)
				}, err
			})
		},
	}
	var desc string
	put := &cobra.Command{
		Use:   "put NAME URL",
		Short: "Create or replace an endpoint",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				res, err := c.PutEndpoint(ctx, api.Endpoint{Name: args[0], URL: args[1], Description: desc})
				return res, func(tw *tabwriter.Writer) {
					// Redacted as every read shows it: a query or user:password
					// may hold a secret.
					fmt.Fprintf(tw, "endpoint %s → %s at raft index %d\n", args[0], transport.RedactURL(args[1]), res.Index)
				}, err
			})
		},
	}
	put.Flags().StringVar(&desc, "description", "", "free text shown in listings")
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an endpoint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				res, err := c.DeleteEndpoint(ctx, args[0])
				return res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "deleted endpoint %s at raft index %d\n", args[0], res.Index)
				}, err
			})
		},
	}
	cmd.AddCommand(list, get, put, del)
	return cmd
}
