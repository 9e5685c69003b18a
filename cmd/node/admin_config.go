package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

func configCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read and change dynamic config (replicated through Raft, applied live on every node)",
	}
	var ns, dest string
	constraintFlags := func(c *cobra.Command) {
		c.Flags().StringVar(&ns, "namespace", "", "constrain the value to this namespace id")
		c.Flags().StringVar(&dest, "destination", "", "constrain the value to this destination (endpoint name or callback URL)")
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List every value that is set, and the registered keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				l, err := c.ConfigList(ctx)
				return l, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "KEY\tNAMESPACE\tDESTINATION\tVALUE\tINDEX")
					for _, e := range l.Entries {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", e.Key, orDash(e.Namespace), orDash(e.Destination), compactJSON(e.Value), e.Index)
					}
					fmt.Fprintln(tw, "\nREGISTERED KEY\tTYPE\tDEFAULT\tCONSTRAINTS")
					for _, k := range l.Keys {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Key, k.Type, compactJSON(k.Default), strings.Join(k.Constraints, ","))
					}
				}, err
			})
		},
	}
	get := &cobra.Command{
		Use:   "get KEY",
		Short: "Show the values of one key under every constraint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				es, err := c.ConfigGet(ctx, args[0])
				return es, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "NAMESPACE\tDESTINATION\tVALUE\tINDEX\tUPDATED\tAUTHOR")
					for _, e := range es {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", orDash(e.Namespace), orDash(e.Destination), compactJSON(e.Value), e.Index,
							e.UpdatedAt.Format(time.RFC3339), orDash(e.Author))
					}
				}, err
			})
		},
	}
	set := &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a value (JSON; a bare word is taken as a string; @file reads the file)",
		Example: `  fusebox admin config set history.outboundQueue.circuitBreakerSettings '{"Timeout":"30s"}' --destination my-endpoint
  fusebox admin config set history.outboundQueue.hostScheduler.maxTaskRPS 50
  fusebox admin config set fusebox.breaker.hintPolicy adopt --namespace ns-1`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			val, err := parseValueArg(args[1])
			if err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				res, err := c.ConfigSet(ctx, args[0], api.ConfigWrite{Namespace: ns, Destination: dest, Value: val})
				return res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "set %s at raft index %d\n", args[0], res.Index)
				}, err
			})
		},
	}
	del := &cobra.Command{
		Use:   "delete KEY",
		Short: "Delete the value of a key under a constraint (the next most specific applies)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				res, err := c.ConfigDelete(ctx, args[0], ns, dest)
				return res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "deleted %s at raft index %d\n", args[0], res.Index)
				}, err
			})
		},
	}
	var limit int
	hist := &cobra.Command{
		Use:   "history",
		Short: "Show recent config changes, newest first (raft index, time, author)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				hs, err := c.ConfigHistory(ctx, limit)
				return hs, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "INDEX\tAT\tAUTHOR\tOP\tKEY\tNAMESPACE\tDESTINATION\tVALUE")
					for _, h := range hs {
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Index, h.At.Format(time.RFC3339), orDash(h.Author), h.Op, h.Key,
							orDash(h.Namespace), orDash(h.Destination), compactJSON(h.Value))
					}
				}, err
			})
		},
	}
	hist.Flags().IntVar(&limit, "limit", 50, "at most this many changes")
	constraintFlags(set)
	constraintFlags(del)
	cmd.AddCommand(list, get, set, del, hist, importCmd(o))
	return cmd
}

// importCmd is `config import FILE.yaml`: a Temporal dynamic-config file.
func importCmd(o *adminOpts) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "import FILE.yaml",
		Short: "Import a Temporal dynamic-config YAML file (validated whole, applied as one Raft entry)",
		Long: `Import a Temporal dynamic-config file (key → list of {value, constraints}).

Every value of the keys fusebox registers is validated first; one bad value
refuses the whole file, naming the key, the index in its list and the line.
The file then replaces, in one Raft entry, every value of each registered key
it names (values of those keys that the file does not list are deleted; other
keys are untouched). Keys fusebox does not know are listed and not applied.
Values are read as Temporal reads them: durations as seconds when unitless,
"d" for days; struct field names in any case.`,
		Example: `  fusebox admin config import dynamicconfig/production.yaml --dry-run
  fusebox admin config import dynamicconfig/production.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("FILE %s: %w", args[0], err)
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				res, err := c.ConfigImport(ctx, data, dryRun)
				return res, func(tw *tabwriter.Writer) { printImport(tw, res) }, err
			})
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "validate and show what would change, write nothing")
	return c
}

func printImport(tw *tabwriter.Writer, res api.ConfigImportResult) {
	switch {
	case res.DryRun:
		fmt.Fprintln(tw, "dry run: nothing written")
	case res.Index > 0:
		fmt.Fprintf(tw, "imported at raft index %d\n", res.Index)
	default:
		fmt.Fprintln(tw, "nothing to import")
	}
	fmt.Fprintln(tw, "CHANGE\tKEY\tNAMESPACE\tDESTINATION\tVALUE")
	for _, e := range res.Set {
		fmt.Fprintf(tw, "set\t%s\t%s\t%s\t%s\n", e.Key, orDash(e.Namespace), orDash(e.Destination), compactJSON(e.Value))
	}
	for _, d := range res.Deleted {
		fmt.Fprintf(tw, "delete\t%s\t%s\t%s\t-\n", d.Key, orDash(d.Namespace), orDash(d.Destination))
	}
	fmt.Fprintf(tw, "unchanged: %d\n", res.Unchanged)
	if len(res.Unknown) > 0 {
		fmt.Fprintln(tw, "\nUNKNOWN KEY (not applied)\tLINE\tVALUES")
		for _, u := range res.Unknown {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", u.Name, u.Line, u.Values)
		}
	}
}

// parseValueArg accepts JSON, @file, or a bare word taken as a JSON string.
func parseValueArg(s string) (json.RawMessage, error) {
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("VALUE %s: %w", s, err)
		}
		s = string(b)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s), nil
	}
	b, _ := json.Marshal(s)
	return b, nil
}
