package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

// shardCmds are `fusebox admin shards …` and `fusebox admin nodes …`.
func shardCmds(o *adminOpts) []*cobra.Command {
	return []*cobra.Command{shardsCmd(o), nodesCmd(o)}
}

func shardArg(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, &exitError{code: 2, msg: fmt.Sprintf("SHARD %q: want a non-negative integer", s)}
	}
	return n, nil
}

func shardRow(tw io.Writer, s api.Shard) {
	fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", s.Shard, orDash(s.Owner), s.Epoch, orDash(s.Pinned), yesNo(s.OwnerDraining))
}

const shardHeader = "SHARD\tOWNER\tEPOCH\tPINNED\tOWNER DRAINING"

func shardsCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Show and steer shard ownership (the committed shard map)",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List every shard: owner, epoch, pin, and the draining nodes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				l, err := c.Shards(ctx)
				return l, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "shard map version %d, %d shards\n\n", l.Version, l.NumShards)
					fmt.Fprintln(tw, shardHeader)
					for _, s := range l.Shards {
						shardRow(tw, s)
					}
					if len(l.Draining) > 0 {
						fmt.Fprintln(tw, "\nDRAINING NODE\tREASON\tSINCE")
						for _, d := range l.Draining {
							fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Node, d.Reason, d.Since.Format(time.RFC3339))
						}
					}
				}, err
			})
		},
	}
	describe := &cobra.Command{
		Use:   "describe SHARD",
		Short: "Show one shard: owner, epoch, pin, backlog and ack level",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := shardArg(args[0])
			if err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				d, err := c.Shard(ctx, id)
				return d, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "shard\t%d\nowner\t%s\nepoch\t%d\npinned\t%s\nowner draining\t%s\nmap version\t%d\n",
						d.Shard.Shard, orDash(d.Owner), d.Epoch, orDash(d.Pinned), yesNo(d.OwnerDraining), d.Version)
					if d.Backlog != nil && d.AckLevel != nil {
						ack := "- (nothing pending)"
						if *d.AckLevel > 0 {
							ack = time.UnixMilli(int64(*d.AckLevel)).UTC().Format(time.RFC3339Nano) + " (oldest pending task)"
						}
						fmt.Fprintf(tw, "backlog\t%d\nack level\t%s\n", *d.Backlog, ack)
					} else {
						fmt.Fprintf(tw, "backlog\t(%s)\nack level\t(%s)\n", d.Tasks, d.Tasks)
					}
				}, err
			})
		},
	}
	move := &cobra.Command{
		Use:   "move SHARD NODE",
		Short: "Pin a shard to a live node; the leader moves it there with a new epoch",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := shardArg(args[0])
			if err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				s, err := c.MoveShard(ctx, id, args[1])
				return s, func(tw *tabwriter.Writer) {
					if s.Owner == args[1] {
						fmt.Fprintf(tw, "shard %d is on %s at epoch %d (pinned)\n", s.Shard, s.Owner, s.Epoch)
					} else {
						fmt.Fprintf(tw, "shard %d is pinned to %s; still on %s at epoch %d, the move is pending\n", s.Shard, args[1], orDash(s.Owner), s.Epoch)
					}
				}, err
			})
		},
	}
	unpin := &cobra.Command{
		Use:   "unpin SHARD",
		Short: "Remove a shard's pin; placement decides its owner again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := shardArg(args[0])
			if err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				s, err := c.UnpinShard(ctx, id)
				return s, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "shard %d unpinned; on %s at epoch %d\n", s.Shard, orDash(s.Owner), s.Epoch)
				}, err
			})
		},
	}
	var (
		epoch int64
		force bool
	)
	closeC := &cobra.Command{
		Use:   "close SHARD (--epoch N | --force)",
		Short: "Make a shard's owner release it; the leader assigns it again with a new epoch",
		Long: `Make a shard's owner release it; the leader assigns it again with a new
epoch. Say which close you mean: --epoch N closes it only if it is still at
epoch N (refused with wrong_owner otherwise), so a close decided on an old
view cannot release a shard that moved since; --force closes it whatever its
epoch. A live owner hands the shard over first, as before a move: it starts
no call on it, and the calls under way end and their results are written
(up to 2 s) before the release, so they are not made again. An owner that
is failed or suspect is not waited for.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := shardArg(args[0])
			if err != nil {
				return err
			}
			hasEpoch := cmd.Flags().Changed("epoch")
			switch {
			case hasEpoch && force:
				return &exitError{code: 2, msg: "--epoch and --force: give one (--epoch N closes only at that epoch, --force whatever the epoch)"}
			case hasEpoch && epoch < 0:
				return &exitError{code: 2, msg: fmt.Sprintf("--epoch %d: want a non-negative epoch (see `fusebox admin shards describe %d`)", epoch, id)}
			case !hasEpoch && !force:
				return &exitError{code: 2, msg: fmt.Sprintf("close needs --epoch N (close only if shard %d is still at epoch N) or --force (close it whatever its epoch)", id)}
			}
			var ep *uint64
			if hasEpoch {
				e := uint64(epoch)
				ep = &e
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				s, err := c.CloseShard(ctx, id, ep)
				if wo, ok := api.AsWrongOwner(err); ok {
					err = fmt.Errorf("%w (not closed: the shard is on %s at epoch %d now)", err, orDash(wo.Owner), wo.Epoch)
				}
				return s, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "shard %d closed; now on %s at epoch %d\n", s.Shard, orDash(s.Owner), s.Epoch)
				}, err
			})
		},
	}
	closeC.Flags().Int64Var(&epoch, "epoch", 0, "close only if the shard is still at this epoch (refused with wrong_owner otherwise)")
	closeC.Flags().BoolVar(&force, "force", false, "close the shard whatever its epoch (no fencing)")
	cmd.AddCommand(list, describe, move, unpin, closeC)
	return cmd
}

func nodesCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Shards per node; drain a node of its shards or undrain it",
	}
	nodeTable := func(ns api.NodeShards) func(*tabwriter.Writer) {
		return func(tw *tabwriter.Writer) {
			state := "not draining"
			if ns.Draining {
				state = "draining (" + ns.DrainReason + ")"
			}
			fmt.Fprintf(tw, "node %s owns %d shards; %s; map version %d\n\n", ns.Node, len(ns.Shards), state, ns.Version)
			fmt.Fprintln(tw, shardHeader)
			for _, s := range ns.Shards {
				shardRow(tw, s)
			}
		}
	}
	shards := &cobra.Command{
		Use:   "shards NODE",
		Short: "List the shards a node owns",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				ns, err := c.NodeShards(ctx, args[0])
				return ns, nodeTable(ns), err
			})
		},
	}
	var wait bool
	var waitTimeout time.Duration
	drain := &cobra.Command{
		Use:   "drain NODE",
		Short: "Move all of a node's shards away and keep it out of placement (until undrain)",
		Long: `Mark NODE draining: the Raft leader moves every shard it owns to the other
members (pins to it stay recorded). With --wait (the default) the command
prints each shard as it leaves and returns once the node owns nothing, or
fails after --wait-timeout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				// The shards it owns before the drain are the ones to see
				// leave: the drain's answer can come after the leader has
				// already moved some (all, on a fast disk), and those would
				// go unreported.
				var before []api.Shard
				if wait {
					if b, err := c.NodeShards(ctx, args[0]); err == nil {
						before = b.Shards
					}
				}
				ns, err := c.DrainNode(ctx, args[0])
				if err == nil && wait {
					ns, err = waitDrained(cmd, c, ns, before, waitTimeout, !o.json)
				}
				return ns, nodeTable(ns), err
			})
		},
	}
	drain.Flags().BoolVar(&wait, "wait", true, "wait until the node owns no shards, printing each as it leaves")
	drain.Flags().DurationVar(&waitTimeout, "wait-timeout", 2*time.Minute, "give up waiting after this long (the drain stays in effect)")
	undrain := &cobra.Command{
		Use:   "undrain NODE",
		Short: "Put a drained node back into shard placement",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				ns, err := c.UndrainNode(ctx, args[0])
				return ns, nodeTable(ns), err
			})
		},
	}
	cmd.AddCommand(shards, drain, undrain)
	return cmd
}

// waitDrained polls the shard map until node owns nothing, printing each
// shard it owned (before the drain, or still in the drain's answer) as it
// leaves, with its new owner, when progress is set.
func waitDrained(cmd *cobra.Command, c *api.Client, ns api.NodeShards, before []api.Shard, timeout time.Duration, progress bool) (api.NodeShards, error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	remaining := map[int]bool{}
	for _, s := range append(before, ns.Shards...) {
		remaining[s.Shard] = true
	}
	out := cmd.ErrOrStderr()
	if progress {
		fmt.Fprintf(out, "draining %s: %d shards to move\n", ns.Node, len(remaining))
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for len(remaining) > 0 {
		select {
		case <-ctx.Done():
			left := make([]string, 0, len(remaining))
			for s := range remaining {
				left = append(left, strconv.Itoa(s))
			}
			sort.Strings(left)
			return ns, fmt.Errorf("node %s still owns shards %s after %s; the drain stays in effect", ns.Node, strings.Join(left, ","), timeout)
		case <-t.C:
		}
		l, err := c.Shards(ctx)
		if err != nil {
			continue // transient (leader change); keep polling until the timeout
		}
		for _, s := range l.Shards {
			if remaining[s.Shard] && s.Owner != ns.Node {
				delete(remaining, s.Shard)
				if progress {
					fmt.Fprintf(out, "shard %d left %s → %s (epoch %d)\n", s.Shard, ns.Node, orDash(s.Owner), s.Epoch)
				}
			} else if !remaining[s.Shard] && s.Owner == ns.Node {
				remaining[s.Shard] = true // placed on it again meanwhile
			}
		}
	}
	final, err := c.NodeShards(cmd.Context(), ns.Node)
	if err != nil {
		return ns, err
	}
	if progress {
		fmt.Fprintf(out, "node %s is drained\n", ns.Node)
	}
	return final, nil
}
