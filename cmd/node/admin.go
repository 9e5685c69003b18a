package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
	"fusebox/internal/tlsutil"
)

// adminOpts are the flags every admin command shares.
type adminOpts struct {
	addr      string
	tokenFile string
	json      bool
	timeout   time.Duration
	tls       tlsutil.ClientFiles // --ca-file, --client-cert, --client-key (tls.go)
}

func adminCmd() *cobra.Command {
	o := &adminOpts{}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Administer a running cluster over its HTTP API",
		Long: `Administer a running cluster through any node's HTTP API. Output is a table
for people, or JSON with --json for scripts. Exit codes: 0 success, 1 error,
2 bad usage, 3 the cluster refused (invalid input, not found, conflict,
no token or one without the role), 4 unavailable (no leader, node
unreachable); commands that follow tasks (tasks submit --wait, dlq redrive
--watch) exit 5 when a task failed or was dead-lettered and 6 when --timeout
passed first; debug exits 7 when it wrote its bundle but a part of it failed.

A cluster with API tokens (serve --admin-token-file) needs one for every
command, reads too: the read role for reads, admin for changes.

Environment (a flag wins): FUSEBOX_ADDR (--addr), FUSEBOX_TOKEN (the token
itself, used when no token file is given), FUSEBOX_TOKEN_FILE (--token-file;
FUSEBOX_ADMIN_TOKEN_FILE is a deprecated alias), FUSEBOX_CACERT (--ca-file),
FUSEBOX_CLIENT_CERT (--client-cert), FUSEBOX_CLIENT_KEY (--client-key).

A node started with TLS serves HTTPS only: use --addr https://HOST:PORT and
--ca-file (an --addr without a scheme is https:// when --ca-file is set).`,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyAdminEnv(cmd)
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.addr, "addr", "127.0.0.1:8470", "HTTP address of any node")
	pf.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token; a cluster with tokens needs one for every command, reads too (read role; admin for changes)")
	pf.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for an answer")
	pf.StringVar(&o.tls.CAFile, "ca-file", "", "PEM CA certificate(s) to verify an HTTPS node with (the cluster's fusebox-ca.pem)")
	pf.StringVar(&o.tls.CertFile, "client-cert", "", "PEM client certificate to present (\"fusebox tls cert create --client\")")
	pf.StringVar(&o.tls.KeyFile, "client-key", "", "PEM private key of --client-cert")
	rc := raftCmd(o)
	rc.AddCommand(raftOpsCmds(o)...) // transfer-leader, remove-peer (admin_raft.go)
	cmd.AddCommand(membersCmd(o), rc, configCmd(o), endpointsCmd(o))
	cmd.AddCommand(snapshotCmd(o), keyringCmd(o))
	cmd.AddCommand(shardCmds(o)...)
	cmd.AddCommand(tasksCmd(o), dlqCmd(o), breakersCmd(o))
	cmd.AddCommand(debugCmd(o))     // admin_debug.go
	cmd.AddCommand(waitReadyCmd(o)) // admin_ready.go
	return cmd
}

// client builds an API client from the shared flags.
func (o *adminOpts) client() (*api.Client, error) {
	tok, err := readSecretFile("--token-file", o.tokenFile)
	if err != nil {
		return nil, err
	}
	if tok == "" {
		tok = strings.TrimSpace(os.Getenv("FUSEBOX_TOKEN"))
	}
	c, err := o.newClient(tok) // tls.go: https with --ca-file and client certificates
	if err != nil {
		return nil, err
	}
	c.Author = author()
	return c, nil
}

// author names the person at the keyboard for the config history.
func author() string {
	user := os.Getenv("USER")
	if user == "" {
		user = "unknown"
	}
	host, _ := os.Hostname()
	return user + "@" + host
}

// call is the body of every admin command: it builds the client, bounds the
// call by --timeout, runs fn, maps API errors to exit codes, and prints the
// answer as JSON (--json) or as fn's table.
func (o *adminOpts) call(cmd *cobra.Command, fn func(ctx context.Context, c *api.Client) (any, func(tw *tabwriter.Writer), error)) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	v, table, err := fn(ctx, c)
	if err != nil {
		return apiExit(connHint(c.Addr(), tlsHint(c.Addr(), err)))
	}
	return o.print(cmd.OutOrStdout(), v, table)
}

// print writes v as JSON with --json, else calls table.
func (o *adminOpts) print(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// apiExit turns API errors into the documented exit codes.
func apiExit(err error) error {
	if err == nil {
		return nil
	}
	var e *api.Error
	if errors.As(err, &e) {
		code := 1
		switch e.Code {
		case api.CodeInvalidArgument, api.CodeNotFound, api.CodeConflict,
			api.CodeUnauthenticated, api.CodePermission, api.CodeTooLarge, api.CodeWrongOwner:
			code = 3
		case api.CodeNoLeader, api.CodeNotLeader, api.CodeUnavailable, api.CodeOverloaded:
			code = 4
		}
		msg := e.Error()
		switch e.Code {
		case api.CodeUnauthenticated:
			msg += "; give a token with --token-file FILE (or FUSEBOX_TOKEN_FILE), or the token itself in FUSEBOX_TOKEN"
		case api.CodePermission:
			msg += "; give a token of that role with --token-file FILE (or FUSEBOX_TOKEN_FILE), or the token itself in FUSEBOX_TOKEN"
		}
		return &exitError{code: code, msg: msg}
	}
	return &exitError{code: 4, msg: err.Error()}
}

func applyEnvNamed(fs interface {
	Changed(string) bool
	Set(string, string) error
}, names map[string]string) error {
	for flag, env := range names {
		if fs.Changed(flag) {
			continue
		}
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(flag, v); err != nil {
				return fmt.Errorf("environment %s=%q: %w", env, v, err)
			}
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	s := strings.TrimSpace(string(raw))
	if json.Compact(&buf, raw) == nil {
		s = buf.String()
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
