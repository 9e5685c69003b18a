package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"fusebox/api"
)

// ANSI sequences of the live view: home, clear to end of line, clear to
// end of screen. Writing a whole frame over the old one (instead of
// clearing first) does not flicker.
const (
	ansiHome      = "\x1b[H"
	ansiClearLine = "\x1b[K"
	ansiClearDown = "\x1b[J"
	ansiClearAll  = "\x1b[2J"
)

// viewInfo is what the view shows besides a snapshot.
type viewInfo struct {
	cfg Config
	dir string
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// renderFrame draws the full live view of s.
func renderFrame(info viewInfo, s snapshot) string {
	var b strings.Builder
	cfg := info.cfg
	until := "until Ctrl-C"
	if cfg.Duration > 0 {
		until = "of " + cfg.Duration.String()
	}
	policy := cfg.HintPolicy
	if policy == "" {
		policy = "confirm (default)"
	}
	fmt.Fprintf(&b, "fusebox demo — %d nodes on loopback · %s %s · %.0f tasks/s per destination\n",
		len(s.Nodes), fmtT(s.At), until, cfg.Rate)
	fmt.Fprintf(&b, "breaker Timeout %v (a demo setting; the default is 60s) · hint policy %s\n\n", cfg.BreakerTimeout, policy)

	b.WriteString("NODES\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  id\tprocess\tgossip\traft\trole\tleader\tshards\tapplied\tpending\thttp")
	for _, n := range s.Nodes {
		proc := "running"
		if !n.Running {
			proc = "exited"
		}
		leader := ""
		if n.Leader {
			leader = "*"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", n.ID, proc, n.Gossip, orDash(n.State), n.Role, leader, n.Shards, n.Applied, n.Pending, n.HTTPAddr)
	}
	tw.Flush()

	b.WriteString("\nBREAKERS (per node; source = where the state came from)\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  node\tdestination\tstate\tsource\tmode\tconsec. fails\treopens in\trecovery ramp")
	for _, br := range s.Breakers {
		open := ""
		if br.OpenRemainingSeconds > 0 {
			open = fmt.Sprintf("%.1fs", br.OpenRemainingSeconds)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", br.Node, br.Destination, br.State, br.Source, br.Mode, br.ConsecutiveFailures, open, rampText(br.Ramp))
	}
	if len(s.Breakers) == 0 {
		fmt.Fprintln(tw, "  (none yet: a node creates a breaker on its first call)")
	}
	tw.Flush()
	if len(s.Unreachable) > 0 {
		fmt.Fprintf(&b, "  unreachable: %s\n", strings.Join(s.Unreachable, ", "))
	}
	b.WriteString("  source: local = the node's own calls or timer · hint = a peer's gossiped hint · operator = a force;\n" +
		"  guarded = closed, but only a few probe calls until one answers (a peer warned); reopens in = time left open\n\n")
	writeTrips(&b, s.Trips, s.Outage)

	b.WriteString("\nDESTINATIONS\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  name\tmode\tdelivered/s\tdelivered\tsubmitted\trequests\tduplicates")
	for _, d := range s.Dests {
		fmt.Fprintf(tw, "  %s\t%s\t%.1f\t%d\t%d\t%d\t%d\n", d.Name, d.Mode, d.PerSec, d.Delivered, d.Submitted, d.Received, d.Duplicates)
	}
	tw.Flush()
	fmt.Fprintf(&b, "  pending tasks (all shards): %d", s.Pending)
	if w := s.Workload; w.Failed > 0 || w.Overloaded > 0 {
		fmt.Fprintf(&b, " · submits refused: %d overloaded, %d failed", w.Overloaded, w.Failed)
	}
	b.WriteString("\n\n")

	writeOutage(&b, s.Outage, s.At)
	b.WriteString("\n")
	ids := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		ids[i] = n.ID
	}
	writeFleet(&b, s.Fleet, ids, s.At)

	b.WriteString("\nBREAKER EVENTS (seen between refreshes)\n")
	for _, e := range s.Events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	if len(s.Events) == 0 {
		b.WriteString("  (none yet)\n")
	}
	if s.Err != "" {
		fmt.Fprintf(&b, "\nlast API error: %s\n", truncate(s.Err, 120))
	}
	fmt.Fprintf(&b, "\nCtrl-C stops and prints a summary · node logs in %s\n", info.dir)
	return b.String()
}

func writeOutage(b *strings.Builder, o outageView, now time.Duration) {
	switch o.Phase {
	case phaseNone:
		b.WriteString("OUTAGE: none configured (--outage-for 0)\n")
		return
	case phaseScheduled:
		fmt.Fprintf(b, "OUTAGE: flaky goes down (%s) at %s for %v — in %.0fs\n", o.Mode, fmtT(o.At), o.For, (o.At - now).Seconds())
		return
	case phaseDown:
		fmt.Fprintf(b, "OUTAGE: flaky is DOWN (%s) since %s, back at %s (%.0fs so far)\n", o.Mode, fmtT(o.At), fmtT(o.At+o.For), o.Elapsed.Seconds())
	case phaseOver:
		fmt.Fprintf(b, "OUTAGE: flaky was down (%s) from %s for %.0fs; it is back\n", o.Mode, fmtT(o.At), o.Elapsed.Seconds())
	}
	measured, estimate := costBars(o.Calls, o.Estimate, 40)
	fmt.Fprintf(b, "  calls the dead destination received (measured, all nodes)  %s %d\n", measured, o.Calls)
	fmt.Fprintf(b, "  per-host breakers, gossip off (ESTIMATE)                    %s %d\n", estimate, o.Estimate)
	fmt.Fprintf(b, "    = %s\n", o.Formula)
	if o.Estimate > o.Calls {
		fmt.Fprintf(b, "  fusebox spared it %d calls (%.0f %% of the per-host cost)\n", o.Estimate-o.Calls, 100*float64(o.Estimate-o.Calls)/float64(o.Estimate))
	}
	if o.Mode == outageUnavailable {
		fmt.Fprintf(b, "    (flaky's own server answered %d requests with 503 meanwhile)\n", o.Received)
	}
	fmt.Fprintf(b, "  flaky tasks submitted meanwhile: %d · refused by open breakers: %d (without breakers each would call it, and retry)\n",
		o.TasksSubmitted, o.Rejected)
}

// renderLine is the one-line form of s, for logs and pipes.
func renderLine(s snapshot) string {
	var b strings.Builder
	ready, leader := 0, s.Leader
	for _, n := range s.Nodes {
		if n.Running && n.Err == "" {
			ready++
		}
	}
	fmt.Fprintf(&b, "%s nodes %d/%d leader %s", fmtT(s.At), ready, len(s.Nodes), orDash(leader))
	for _, d := range s.Dests {
		fmt.Fprintf(&b, " | %s %s %.1f/s (%d)", d.Name, d.Mode, d.PerSec, d.Delivered)
	}
	b.WriteString(" | flaky breakers")
	for _, br := range s.Breakers {
		if br.Destination == destFlaky {
			fmt.Fprintf(&b, " %s:%s/%s", br.Node, br.State, br.Source)
			if br.Mode != "auto" {
				fmt.Fprintf(&b, "/%s", br.Mode)
			}
			if br.Ramp != nil {
				fmt.Fprintf(&b, "/ramp %.1f/s", br.Ramp.RPS)
			}
		}
	}
	if len(s.Trips) > 0 {
		fmt.Fprintf(&b, " | trips %s", tripsLine(s.Trips))
	}
	fmt.Fprintf(&b, " | pending %d", s.Pending)
	if o := s.Outage; o.Phase == phaseDown || o.Phase == phaseOver {
		fmt.Fprintf(&b, " | outage %s: %d calls (per-host estimate %d)", o.Phase, o.Calls, o.Estimate)
	}
	if f := fleetLine(s.Fleet); f != "" {
		b.WriteString(" | " + f)
	}
	if s.Err != "" {
		fmt.Fprintf(&b, " | error: %s", truncate(s.Err, 80))
	}
	return b.String()
}

// screen writes frames: redrawn in place on a terminal, one line each
// otherwise. It is safe for concurrent use (start-up progress comes from
// one goroutine per node).
type screen struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	first bool
}

func newScreen(w io.Writer, tty bool) *screen { return &screen{w: w, tty: tty, first: true} }

func (sc *screen) show(info viewInfo, s snapshot) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !sc.tty {
		fmt.Fprintln(sc.w, renderLine(s))
		return
	}
	var b strings.Builder
	if sc.first {
		b.WriteString(ansiClearAll)
		sc.first = false
	}
	b.WriteString(ansiHome)
	for _, line := range strings.Split(strings.TrimRight(renderFrame(info, s), "\n"), "\n") {
		b.WriteString(line)
		b.WriteString(ansiClearLine + "\n")
	}
	b.WriteString(ansiClearDown)
	io.WriteString(sc.w, b.String())
}

// message prints a line outside the live view (start-up progress, the
// summary).
func (sc *screen) message(s string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	fmt.Fprintln(sc.w, s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// rampText is a recovery ramp as the frame shows it: this node's rate now,
// the rate it climbs to and the time left.
func rampText(r *api.BreakerRamp) string {
	if r == nil {
		return ""
	}
	target := "unlimited"
	if r.TargetRPS > 0 {
		target = fmt.Sprintf("%.0f/s", r.TargetRPS)
	}
	return fmt.Sprintf("%.1f/s → %s, %.0fs left", r.RPS, target, max(time.Until(r.Until).Seconds(), 0))
}
