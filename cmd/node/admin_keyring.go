package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"fusebox/api"
)

func keyringCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keyring",
		Short: "List and rotate the gossip encryption keys of every live member, without a restart",
		Long: `List and rotate the gossip (memberlist) encryption keys of the live cluster.
The node you call runs each operation on every alive member through its API
(with the node's own token) and each member rewrites its --gossip-key-file
(atomically, the primary key first), so a node restarted later rejoins with the
keys in force. Keys are shown only by fingerprint (sha256: and 16 hex digits).

Rotation, one command at a time, checking the answer of each:

  fusebox admin keyring install NEWKEY   # every member accepts NEWKEY
  fusebox admin keyring use NEWKEY       # every member encrypts with NEWKEY
  fusebox admin keyring remove OLDKEY    # OLDKEY is no longer accepted

"use" is refused unless every live member has the key installed; "remove" is
refused while any member encrypts with the key. A member that is down during a
rotation keeps its old file: install the new key in its file before restarting
it. Generate a key with: head -c 32 /dev/urandom | base64`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "Show the keys installed on every live member (fingerprints only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return keyringRun(o, cmd, "list", "")
		},
	}
	cmd.AddCommand(list)
	for _, op := range []struct{ name, short string }{
		{"install", "Install KEY on every live member (accepted for decryption)"},
		{"use", "Make KEY the primary (encrypting) key on every live member"},
		{"remove", "Remove KEY from every live member (refused while it is in use)"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   op.name + " KEY",
			Short: op.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return keyringRun(o, cmd, op.name, args[0])
			},
		})
	}
	return cmd
}

func keyringRun(o *adminOpts, cmd *cobra.Command, op, key string) error {
	var partial error
	err := o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
		ans, err := c.Keyring(ctx, op, key)
		if err == nil && ans.Failed > 0 {
			partial = &exitError{code: 4, msg: fmt.Sprintf("keyring %s failed on %d of %d live members (above); run it again once they answer", op, ans.Failed, ans.Members)}
		}
		return ans, func(tw *tabwriter.Writer) {
			fmt.Fprintf(tw, "%s on %d live members, %d failed\n\n", op, ans.Members, ans.Failed)
			fmt.Fprintln(tw, "KEY\tNODES\tPRIMARY ON")
			for _, k := range ans.Keys {
				fmt.Fprintf(tw, "%s\t%d/%d\t%d\n", k.Fingerprint, k.Nodes, ans.Members-ans.Failed, k.PrimaryOn)
			}
			for _, nd := range ans.Nodes {
				if nd.Error != "" {
					fmt.Fprintf(tw, "\n%s: %s", nd.Node, nd.Error)
				}
			}
			if ans.Failed > 0 {
				fmt.Fprintln(tw)
			}
		}, err
	})
	if err != nil {
		return err
	}
	return partial
}
