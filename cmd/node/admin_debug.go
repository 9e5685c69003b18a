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
	"sort"
	"strconv"
	"strings"
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

Members are collected side by side (up to 4 at once), each within its own
--timeout + --duration. A part that fails is written as <part>.error, the
rest is kept, and stderr says so; the bundle is then still written and the
command exits 7, naming the failed parts.

Secrets: task requests are not collected; endpoint and destination URLs are
redacted by the API; log lines carry no tokens, header values or URL
queries. Needs an admin token.`,
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

// exitDebugPartial is debug's exit code when the bundle was written but
// some of its parts failed (each is a <part>.error file in it).
const exitDebugPartial = 7

// debugParallel bounds how many members are collected at once.
const debugParallel = 4

func runDebug(cmd *cobra.Command, o *adminOpts, d time.Duration, output, only string) error {
	progress := &lockedWriter{w: cmd.ErrOrStderr()}
	c, err := o.client()
	if err != nil {
		return err
	}
	mctx, mcancel := context.WithTimeout(cmd.Context(), o.timeout)
	members, err := c.Members(mctx)
	mcancel()
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
	clients := make([]*api.Client, len(targets))
	for i, m := range targets {
		oo := *o
		oo.addr = m.HTTPAddr
		if clients[i], err = oo.client(); err != nil {
			return err
		}
	}
	f, err := createPrivate(output) // mode 0600 even over an existing file of another mode
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	defer f.Discard()
	gz := gzip.NewWriter(f)
	b := &bundle{tw: tar.NewWriter(gz), now: time.Now()}
	b.json("manifest.json", map[string]any{"collected_at": b.now.UTC(), "duration": d.String(), "from": c.Addr(), "members": members})
	// Members are collected side by side (a few at a time), each within its
	// own --timeout + --duration from when its collection starts: one
	// deadline shared by members collected one after another ran out on
	// the later ones.
	sem := make(chan struct{}, debugParallel)
	var wg sync.WaitGroup
	for i, m := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-cmd.Context().Done():
				b.failed(m.ID+"/", "collection", cmd.Context().Err(), progress)
				return
			}
			defer func() { <-sem }()
			fmt.Fprintf(progress, "debug: collecting from %s (%s) for %v\n", m.ID, m.HTTPAddr, d)
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout+d)
			defer cancel()
			collectNode(ctx, b, clients[i], m.ID, d, progress)
		}()
	}
	wg.Wait()
	err = errors.Join(b.err, b.tw.Close(), gz.Close())
	if err == nil {
		err = f.Commit()
	}
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if len(b.failures) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d nodes)\n", output, len(targets))
		return nil
	}
	sort.Strings(b.failures)
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d nodes, %d parts failed)\n", output, len(targets), len(b.failures))
	return &exitError{code: exitDebugPartial, msg: fmt.Sprintf("debug: the bundle %s is incomplete: %d part(s) failed, each written as <part>.error in it: %s",
		output, len(b.failures), strings.Join(b.failures, ", "))}
}

// collectNode writes one member's parts under <id>/; a part that fails is
// recorded as <part>.error (and said on progress) so one broken call does
// not lose the rest.
func collectNode(ctx context.Context, b *bundle, c *api.Client, id string, d time.Duration, progress io.Writer) {
	dir := id + "/"
	part := func(name string, fn func() (any, error)) {
		v, err := fn()
		if err != nil {
			b.failed(dir, name, err, progress)
			return
		}
		b.json(dir+name+".json", v)
	}
	part("members", func() (any, error) { return c.Members(ctx) })
	part("raft", func() (any, error) { return c.Raft(ctx) })
	part("breakers", func() (any, error) { return c.Breakers(ctx, false) })
	part("config", func() (any, error) { return c.ConfigList(ctx) })
	part("shards", func() (any, error) { return c.Shards(ctx) })
	get := func(path string, q url.Values) ([]byte, error) {
		var buf bytes.Buffer
		_, err := c.GetRaw(ctx, path, q, &buf)
		return buf.Bytes(), err
	}
	raw := func(name, path string, q url.Values) error {
		data, err := get(path, q)
		if err != nil {
			b.failed(dir, name, err, progress)
			return err
		}
		b.file(dir+name, data)
		return nil
	}
	// The CPU profile runs for the whole duration while metrics are
	// sampled beside it. A node without --enable-pprof answers 404: the
	// profiles are skipped, which is no failure.
	cpu := make(chan bool, 1)
	go func() {
		data, err := get("/debug/pprof/profile", url.Values{"seconds": {strconv.Itoa(int(d.Seconds()))}})
		var e *api.Error
		switch {
		case errors.As(err, &e) && e.Status == 404:
			b.file(dir+"profiles-skipped.txt", []byte("profiles skipped: the node runs without --enable-pprof\n"))
			cpu <- false
		case err != nil:
			b.failed(dir, "profile.pprof", err, progress)
			cpu <- false
		default:
			b.file(dir+"profile.pprof", data)
			cpu <- true
		}
	}()
	const samples = 3
	for i := range samples {
		name := fmt.Sprintf("metrics-%d.prom", i+1)
		if data, err := get("/metrics", nil); err != nil {
			b.fail(dir, name, err)
			fmt.Fprintf(progress, "debug: %s: metrics sample %d/%d failed: %v\n", id, i+1, samples, err)
		} else {
			b.file(dir+name, data)
			fmt.Fprintf(progress, "debug: %s: metrics sample %d/%d\n", id, i+1, samples)
		}
		if i < samples-1 {
			select {
			case <-time.After(d / (samples - 1)):
			case <-ctx.Done():
			}
		}
	}
	if <-cpu {
		heap := raw("heap.pprof", "/debug/pprof/heap", nil)
		stacks := raw("goroutine.txt", "/debug/pprof/goroutine", url.Values{"debug": {"2"}})
		if heap == nil && stacks == nil {
			fmt.Fprintf(progress, "debug: %s: profiles collected\n", id)
		}
	}
	var logs bytes.Buffer
	if _, err := c.DebugLogs(ctx, 0, &logs); err != nil {
		b.failed(dir, "logs.jsonl", err, progress)
	} else {
		b.file(dir+"logs.jsonl", logs.Bytes())
	}
}

// lockedWriter serialises the progress lines of members collected side by
// side.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// bundle writes files into the tar stream; the first write error sticks.
// Members are collected side by side, and each one's CPU profile beside
// its metrics sampler: mu serialises their writes.
type bundle struct {
	mu       sync.Mutex
	tw       *tar.Writer
	now      time.Time
	err      error
	failures []string // <id>/<part> of every part that failed
}

// failed records a part that failed: <part>.error in the bundle, a line on
// progress, and its name for the command's exit.
func (b *bundle) failed(dir, name string, err error, progress io.Writer) {
	b.fail(dir, name, err)
	fmt.Fprintf(progress, "debug: %s: %s failed: %v\n", strings.TrimSuffix(dir, "/"), name, err)
}

// fail is failed without the progress line (the caller writes its own).
func (b *bundle) fail(dir, name string, err error) {
	b.file(dir+name+".error", []byte(err.Error()+"\n"))
	b.mu.Lock()
	b.failures = append(b.failures, dir+name)
	b.mu.Unlock()
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
