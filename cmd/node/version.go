package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

func versionCmd() *cobra.Command {
	o := &adminOpts{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version and, with --addr, every cluster member's",
		Long: `Print the version of this fusebox binary. With --addr (a node's HTTP address),
also list the members of that node's cluster with the version each one
gossips, for checking a rolling upgrade. --token-file, --ca-file, --client-cert,
--client-key and their environment variables work as for "fusebox admin".`,
		Example: "  fusebox version\n  fusebox version --addr 127.0.0.1:8470 --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			query := cmd.Flags().Changed("addr")
			if err := applyAdminEnv(cmd); err != nil {
				return err
			}
			local := map[string]string{"version": version, "go": runtime.Version()}
			if !query {
				return o.print(cmd.OutOrStdout(), local, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "fusebox %s (%s)\n", version, runtime.Version())
				})
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				ms, err := c.Members(ctx)
				sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
				type memberVersion struct {
					ID      string `json:"id"`
					State   string `json:"state"`
					Version string `json:"version"`
					// LogVersion 0: a build from before log versions were advertised.
					LogVersion int `json:"log_version"`
				}
				out := struct {
					Client  map[string]string `json:"client"`
					Members []memberVersion   `json:"members"`
				}{Client: local}
				for _, m := range ms {
					out.Members = append(out.Members, memberVersion{ID: m.ID, State: m.State, Version: m.Version, LogVersion: m.LogVersion})
				}
				return out, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "fusebox %s (%s)\n\n", version, runtime.Version())
					fmt.Fprintln(tw, "MEMBER\tSTATE\tVERSION\tLOG VERSION")
					for _, m := range out.Members {
						lv := "-"
						if m.LogVersion > 0 {
							lv = strconv.Itoa(m.LogVersion)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.ID, m.State, orDash(m.Version), lv)
					}
				}, err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8470", "HTTP address of any node; given, the members' versions are listed")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding a bearer token with the read role")
	f.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for an answer")
	f.StringVar(&o.tls.CAFile, "ca-file", "", "PEM CA certificate(s) to verify an HTTPS node with")
	f.StringVar(&o.tls.CertFile, "client-cert", "", "PEM client certificate to present")
	f.StringVar(&o.tls.KeyFile, "client-key", "", "PEM private key of --client-cert")
	return cmd
}

// Bad usage exits 2 everywhere. cobra reports it in three ways, all turned
// into an exitError with code 2 here: flag errors (FlagErrorFunc), argument
// errors (each command's Args, wrapped), and an unknown subcommand, which
// cobra only rejects for the root command (as a plain error from Find) and
// otherwise answers with the group's help and success — so every group
// without its own Run gets one that refuses unknown words.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: 2, msg: fmt.Sprintf("%v\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && !c.Runnable():
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, args []string) error {
				if len(args) > 0 {
					return &exitError{code: 2, msg: fmt.Sprintf("unknown command %q for %q\nRun '%s --help' for usage.", args[0], c.CommandPath(), c.CommandPath())}
				}
				return c.Help()
			}
		case c.Args != nil:
			args := c.Args
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					return &exitError{code: 2, msg: fmt.Sprintf("%v\nRun '%s --help' for usage.", err, c.CommandPath())}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// usageExit gives the root's unknown-command error (cobra has no typed
// error for it) exit code 2.
func usageExit(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	if strings.HasPrefix(err.Error(), "unknown command ") || strings.HasPrefix(err.Error(), "unknown flag") || strings.HasPrefix(err.Error(), "unknown shorthand flag") {
		return &exitError{code: 2, msg: err.Error() + "\nRun 'fusebox --help' for usage."}
	}
	return err
}

// connHint turns a refused connection into advice about --addr.
func connHint(addr string, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return &exitError{code: 4, msg: fmt.Sprintf("no fusebox node answers at %s (connection refused): is it running? Point --addr (or FUSEBOX_ADDR) at a node's HTTP address", addr)}
	}
	return err
}
