package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

// maxDebugDuration bounds --duration (and so the CPU profile).
const maxDebugDuration = 5 * time.Minute

func debugCmd(o *adminOpts) *cobra.Command {
	var duration time.Duration
	var output, nodeID string
	cmd := &cobra.Command{
		Use:   "debug --output FILE.tar.gz [--duration 30s] [--node ID]",
		Short: "Collect a debug bundle from every member (or one) into a .tar.gz",
		Long: `Collect a debug bundle, as "consul debug" does: from every alive member
(or only --node), for --duration: metrics scraped 3 times over the duration,
a CPU profile of the duration and heap and goroutine profiles (only from
nodes running with --enable-pprof; the bundle says when they were skipped),
Raft state, members, breakers, the dynamic config, the shard map and the
node's recent log lines. Progress goes to stderr; the bundle to --output.

Secrets: task requests are not collected; endpoint and destination URLs are
redacted by the API; log lines carry no tokens, header values or URL
queries. Needs an admin token. --timeout is raised to cover --duration.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return usageErr("--output is required (the .tar.gz to write)")
			}
			if duration < time.Second || duration > maxDebugDuration {
				return usageErr(fmt.Sprintf("--duration %v: want between 1s and %v", duration, maxDebugDuration))
			}
			return runDebug(cmd, o, duration, output, nodeID)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 30*time.Second, "how long to sample metrics and the CPU profile (1s–5m)")
	cmd.Flags().StringVar(&output, "output", "", "file to write the bundle to (.tar.gz, mode 0600)")
	cmd.Flags().StringVar(&nodeID, "node", "", "collect from this member only (default: every alive member)")
	return cmd
}

func usageErr(msg string) error { return &exitError{code: 2, msg: msg} }

func runDebug(cmd *cobra.Command, o *adminOpts, d time.Duration, output, only string) error {
	progress := cmd.ErrOrStderr()
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout+d)
	defer cancel()
	members, err := c.Members(ctx)
	if err != nil {
		return apiExit(connHint(c.Addr(), err))
	}
	var targets []api.Member
	for _, m := range members {
		if (only == "" && m.State == "alive") || m.ID == only {
			targets = append(targets, m)
		}
	}
	if len(targets) == 0 {
		return &exitError{code: 3, msg: fmt.Sprintf("--node %q: no such member (fusebox admin members lists them)", only)}
	}
	f, err := createPrivate(output) // mode 0600 even over an existing file of another mode
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	defer f.Discard()
	gz := gzip.NewWriter(f)
	b := &bundle{tw: tar.NewWriter(gz), now: time.Now()}
	b.json("manifest.json", map[string]any{"collected_at": b.now.UTC(), "duration": d.String(), "from": c.Addr(), "members": members})
	for _, m := range targets {
		fmt.Fprintf(progress, "debug: collecting from %s (%s) for %v\n", m.ID, m.HTTPAddr, d)
		oo := *o
		oo.addr = m.HTTPAddr
		mc, err := oo.client()
		if err != nil {
			return err
		}
		collectNode(ctx, b, mc, m.ID, d, progress)
	}
	err = errors.Join(b.err, b.tw.Close(), gz.Close())
	if err == nil {
		err = f.Commit()
	}
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d nodes)\n", output, len(targets))
	return nil
}

// collectNode writes one member's parts under <id>/; a part that fails is
// recorded as <part>.error so one broken call does not lose the rest.
func collectNode(ctx context.Context, b *bundle, c *api.Client, id string, d time.Duration, progress io.Writer) {
	dir := id + "/"
	part := func(name string, fn func() (any, error)) {
		v, err := fn()
		if err != nil {
			b.file(dir+name+".error", []byte(err.Error()+"\n"))
			return
		}
		b.json(dir+name+".json", v)
	}
	part("members", func() (any, error) { return c.Members(ctx) })
	part("raft", func() (any, error) { return c.Raft(ctx) })
	part("breakers", func() (any, error) { return c.Breakers(ctx, false) })
	part("config", func() (any, error) { return c.ConfigList(ctx) })
	part("shards", func() (any, error) { return c.Shards(ctx) })
	raw := func(name, path string, q url.Values) error {
		var buf bytes.Buffer
		if _, err := c.GetRaw(ctx, path, q, &buf); err != nil {
			b.file(dir+name+".error", []byte(err.Error()+"\n"))
			return err
		}
		b.file(dir+name, buf.Bytes())
		return nil
	}
	// The CPU profile runs for the whole duration while metrics are
	// sampled beside it.
	cpu := make(chan error, 1)
	go func() {
		cpu <- raw("profile.pprof", "/debug/pprof/profile", url.Values{"seconds": {strconv.Itoa(int(d.Seconds()))}})
	}()
	const samples = 3
	for i := range samples {
		_ = raw(fmt.Sprintf("metrics-%d.prom", i+1), "/metrics", nil)
		fmt.Fprintf(progress, "debug: %s: metrics sample %d/%d\n", id, i+1, samples)
		if i < samples-1 {
			select {
			case <-time.After(d / (samples - 1)):
			case <-ctx.Done():
			}
		}
	}
	if err := <-cpu; err != nil {
		var e *api.Error
		if errors.As(err, &e) && e.Status == 404 {
			b.file(dir+"profiles-skipped.txt", []byte("profiles skipped: the node runs without --enable-pprof\n"))
		}
	} else {
		_ = raw("heap.pprof", "/debug/pprof/heap", nil)
		_ = raw("goroutine.txt", "/debug/pprof/goroutine", url.Values{"debug": {"2"}})
		fmt.Fprintf(progress, "debug: %s: profiles collected\n", id)
	}
	var logs bytes.Buffer
	if _, err := c.DebugLogs(ctx, 0, &logs); err != nil {
		b.file(dir+"logs.jsonl.error", []byte(err.Error()+"\n"))
	} else {
		b.file(dir+"logs.jsonl", logs.Bytes())
	}
}

// bundle writes files into the tar stream; the first write error sticks.
// The CPU profile's goroutine writes beside the metrics sampler: mu
// serialises them.
type bundle struct {
	mu  sync.Mutex
	tw  *tar.Writer
	now time.Time
	err error
}

func (b *bundle) file(name string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	hdr := &tar.Header{Name: filepath.ToSlash(filepath.Join("fusebox-debug", name)), Mode: 0o600, Size: int64(len(data)), ModTime: b.now}
	if b.err = b.tw.WriteHeader(hdr); b.err == nil {
		_, b.err = b.tw.Write(data)
	}
}

func (b *bundle) json(name string, v any) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		out = []byte(err.Error())
	}
	b.file(name, append(out, '\n'))
}
