package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
	"fusebox/raftstore"
)

func snapshotCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, restore and inspect snapshots of the replicated state",
		Long: `A snapshot holds the whole Raft-replicated state: dynamic config and its
history, the Nexus endpoint registry, forced breakers, the shard count, shard
map and draining nodes, the tasks (pending, terminal and dead-lettered) and the
request-id dedup window. It does not hold the Raft configuration (servers),
breaker state (gossiped, not replicated), tokens, keys or certificates.

The file is one JSON header line (format version, Raft index and term, the
fusebox version that wrote it, SHA-256 of the payload) and the payload. It
holds task requests as submitted, secrets in their headers included: keep it
as you keep the data dirs.`,
	}
	cmd.AddCommand(snapshotSaveCmd(o), snapshotRestoreCmd(o), snapshotInspectCmd(o))
	return cmd
}

func snapshotSaveCmd(o *adminOpts) *cobra.Command {
	return &cobra.Command{
		Use:     "save FILE",
		Short:   "Write a consistent snapshot of the cluster's state, taken on the leader, to FILE",
		Example: "  fusebox admin snapshot save backup-$(date +%F).snap",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				tmp, err := createPrivate(path)
				if err != nil {
					return nil, nil, &exitError{code: 1, msg: fmt.Sprintf("FILE %s: %v", path, err)}
				}
				defer tmp.Discard()
				if _, err := c.SaveSnapshot(ctx, tmp); err != nil {
					return nil, nil, err
				}
				// Verify what arrived before it replaces anything.
				if _, err := tmp.Seek(0, 0); err != nil {
					return nil, nil, err
				}
				f, err := raftstore.ReadSnapshotFile(tmp, api.MaxSnapshotBytes)
				if err != nil {
					return nil, nil, &exitError{code: 1, msg: fmt.Sprintf("the snapshot received does not verify: %v", err)}
				}
				if err := tmp.Commit(); err != nil {
					return nil, nil, &exitError{code: 1, msg: fmt.Sprintf("FILE %s: %v", path, err)}
				}
				h := f.Header
				return h, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "saved %s: raft index %d, term %d, %d bytes of state, fusebox %s, taken on %s\n",
						path, h.Index, h.Term, h.PayloadSize, h.FuseboxVersion, h.Node)
				}, nil
			})
		},
	}
}

func snapshotRestoreCmd(o *adminOpts) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the cluster's state with a snapshot file's",
		Long: `Replace the whole replicated state of the running cluster with FILE's, through
the leader (Raft's restore: the leader installs it and sends it to every
follower). Everything written since the snapshot is lost. The file is verified
first, here and on the leader: a damaged file (checksum mismatch), another file
format, or a snapshot with another shard count is refused; a snapshot written
by another fusebox version is refused unless --force. The restored shard map
gets a new version and new epochs, so shard owners re-acquire their shards.`,
		Example: "  fusebox admin snapshot restore backup-2026-12-01.snap",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if err := verifyFile(path); err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				fh, err := os.Open(path)
				if err != nil {
					return nil, nil, &exitError{code: 1, msg: fmt.Sprintf("FILE %s: %v", path, err)}
				}
				defer fh.Close()
				res, err := c.RestoreSnapshot(ctx, fh, force)
				return res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "restored %s (raft index %d, term %d, fusebox %s); shard map is now version %d\n",
						path, res.Index, res.Term, res.FuseboxVersion, res.ShardMapVersion)
				}, err
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "restore a snapshot written by another fusebox version")
	return cmd
}

// verifyFile checks a snapshot file locally (exit 3: the file is refused).
func verifyFile(path string) error {
	_, err := readSnapshotFile(path)
	return err
}

func readSnapshotFile(path string) (*raftstore.SnapshotFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, &exitError{code: 1, msg: fmt.Sprintf("FILE %s: %v", path, err)}
	}
	defer fh.Close()
	f, err := raftstore.ReadSnapshotFile(fh, api.MaxSnapshotBytes)
	if err != nil {
		return nil, &exitError{code: 3, msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return f, nil
}

func snapshotInspectCmd(o *adminOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Verify a snapshot file and print what it holds (no cluster needed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := readSnapshotFile(args[0])
			if err != nil {
				return err
			}
			sum, err := raftstore.InspectSnapshot(f)
			if err != nil {
				return &exitError{code: 3, msg: fmt.Sprintf("%s: %v", args[0], err)}
			}
			h := sum.Header
			return o.print(cmd.OutOrStdout(), sum, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "file format\t%s v%d (state v%d)\n", h.Format, h.Version, h.StateVersion)
				fmt.Fprintf(tw, "raft index, term\t%d, %d\n", h.Index, h.Term)
				fmt.Fprintf(tw, "written by\tfusebox %s on %s at %s\n", h.FuseboxVersion, h.Node, h.CreatedAt.Format(time.RFC3339))
				fmt.Fprintf(tw, "payload\t%d bytes, sha256 %s (verified)\n", h.PayloadSize, h.PayloadSHA256)
				fmt.Fprintf(tw, "cluster id\t%s\n", orDash(sum.ClusterID))
				fmt.Fprintf(tw, "config entries\t%d (history %d)\n", sum.ConfigEntries, sum.ConfigHistory)
				fmt.Fprintf(tw, "endpoints\t%d\n", sum.Endpoints)
				fmt.Fprintf(tw, "forced breakers\t%d\n", sum.ForcedBreakers)
				fmt.Fprintf(tw, "shards\t%d, map version %d, %d draining nodes\n", sum.ShardCount, sum.ShardMapVersion, sum.DrainingNodes)
				for _, st := range sum.TaskStatuses() {
					fmt.Fprintf(tw, "tasks %s\t%d\n", st, sum.Tasks[st])
				}
				if len(sum.Tasks) == 0 {
					fmt.Fprintln(tw, "tasks\t0")
				}
			})
		},
	}
}
