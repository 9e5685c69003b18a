package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"fusebox/api"
	"fusebox/ui"
)

// Where a node's opening of the flaky breaker came from: the feature the
// demo is about is that most nodes stop calling a dead destination because
// a peer told them, not because they paid the failures themselves.
const (
	originLocal    = "local failures" // closed → open on this node's own failed calls
	originProbe    = "failed probe"   // half-open → open: this node's probe call failed
	originCheck    = "failed check"   // half-open → open decided by a health check, no call (ui.Transition.ByCheck)
	originHint     = "peer hint"      // a peer's gossiped hint opened it (no call of its own)
	originOperator = "operator"       // a force or a config change
)

// tripOrigins is the column order of the view (local, probe, check, hint,
// operator).
var tripOrigins = []string{originLocal, originProbe, originCheck, originHint, originOperator}

// originOf classifies one opening by the transition the node recorded.
func originOf(t ui.Transition) string {
	switch {
	case t.Source == "operator":
		return originOperator
	case t.Source == "hint":
		return originHint
	case t.From == "half-open" && t.ByCheck:
		return originCheck
	case t.From == "half-open":
		return originProbe
	}
	return originLocal
}

// nodeTrips is what one node's flaky breaker did: its latest opening and
// the openings by origin over the run.
type nodeTrips struct {
	Node   string
	LastAt time.Duration // since the workload started
	Origin string        // of the latest opening
	Detail string        // the confirm policy's round behind it, if any
	Counts map[string]int
}

// trips follows every node's flaky openings in the cluster timeline
// (GET /ui/api/transitions?scope=cluster, each node's ring of its own
// transitions). Used from the demo's main loop only.
type trips struct {
	seen   map[string]uint64 // node → highest Seq counted
	byNode map[string]*nodeTrips
	// probes are the failed probes' times (since the workload start), each
	// a real task spent finding the destination still down; the newest
	// maxProbeTimes per node.
	probes map[string][]time.Duration
}

// maxProbeTimes bounds the failed probes remembered per node.
const maxProbeTimes = 1000

func newTrips() *trips {
	return &trips{seen: map[string]uint64{}, byNode: map[string]*nodeTrips{}, probes: map[string][]time.Duration{}}
}

// probesBetween counts the failed probes in [from, to], all nodes.
func (tr *trips) probesBetween(from, to time.Duration) int {
	n := 0
	for _, ps := range tr.probes {
		for _, at := range ps {
			if at >= from && at <= to {
				n++
			}
		}
	}
	return n
}

// fetchTimeline reads the merged timeline from the first node that answers.
func fetchTimeline(ctx context.Context, cl *cluster) (ui.TransitionList, error) {
	var list ui.TransitionList
	err := cl.call(ctx, 0, func(ctx context.Context, c *api.Client) error {
		return c.Do(ctx, http.MethodGet, "/ui/api/transitions", map[string][]string{"scope": {"cluster"}}, nil, &list)
	})
	return list, err
}

// update counts the flaky openings not counted yet; begin is the wall
// clock of the workload's start.
func (tr *trips) update(list ui.TransitionList, begin time.Time) {
	high := map[string]uint64{}
	// Oldest first, so the last one counted is the latest.
	for i := len(list.Transitions) - 1; i >= 0; i-- {
		t := list.Transitions[i]
		high[t.Node] = max(high[t.Node], t.Seq)
		if t.Destination != destFlaky || t.To != "open" || t.Seq <= tr.seen[t.Node] {
			continue
		}
		n := tr.byNode[t.Node]
		if n == nil {
			n = &nodeTrips{Node: t.Node, Counts: map[string]int{}}
			tr.byNode[t.Node] = n
		}
		n.Origin = originOf(t)
		n.LastAt = t.At.Sub(begin)
		n.Counts[n.Origin]++
		if n.Origin == originProbe {
			ps := append(tr.probes[t.Node], n.LastAt)
			tr.probes[t.Node] = ps[max(0, len(ps)-maxProbeTimes):]
		}
	}
	for node, s := range high {
		tr.seen[node] = max(tr.seen[node], s)
	}
}

// view returns every node's trips, by node, with the confirm round of
// its flaky breaker now (b.Confirm) as the detail.
func (tr *trips) view(breakers []breakerView) []nodeTrips {
	conf := map[string]*api.BreakerConfirm{}
	for _, b := range breakers {
		if b.Destination == destFlaky {
			conf[b.Node] = b.Confirm
		}
	}
	out := make([]nodeTrips, 0, len(tr.byNode))
	for _, n := range tr.byNode {
		v := *n
		v.Counts = make(map[string]int, len(n.Counts))
		for k, c := range n.Counts {
			v.Counts[k] = c
		}
		v.Detail = confirmDetail(v.Node, v.Origin, conf[v.Node])
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// confirmDetail says, in the confirm policy's words, who reported the
// failure and who checked it.
func confirmDetail(node, origin string, c *api.BreakerConfirm) string {
	if c == nil {
		return ""
	}
	switch c.Outcome {
	case "pending":
		return fmt.Sprintf("paused: %s reported, %s asked to check", orDash(c.Accused), orDash(c.Designated))
	case "confirmed":
		if c.By == node {
			return fmt.Sprintf("this node checked %s's report: it failed", orDash(c.Accused))
		}
		if c.Accused == node && origin != originHint {
			return fmt.Sprintf("reported it; %s confirmed", orDash(c.By))
		}
		return fmt.Sprintf("%s reported, %s confirmed", orDash(c.Accused), orDash(c.By))
	case "refuted":
		return fmt.Sprintf("%s's report refuted by %s", orDash(c.Accused), orDash(c.By))
	case "gave_up":
		return fmt.Sprintf("%s reported, nobody confirmed: each node probes alone", orDash(c.Accused))
	}
	return c.Outcome
}

// writeTrips is the view's section on why each node stopped calling flaky.
func writeTrips(b *strings.Builder, ts []nodeTrips, o outageView) {
	b.WriteString("WHY EACH NODE STOPPED CALLING flaky (its latest opening; openings over the run: local = its own\n" +
		"  failed calls, probe = its failed probe (a task), check = a failed health check (no task), hint = a\n" +
		"  peer's hint opened it without a call of its own)\n")
	if len(ts) == 0 {
		b.WriteString("  (no opening yet)\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  node\tlatest opening\tlocal\tprobe\tcheck\thint\toperator\tcalls while down")
	for _, n := range ts {
		latest := fmtT(n.LastAt) + " " + n.Origin
		if n.Detail != "" {
			latest += " (" + n.Detail + ")"
		}
		counts := make([]string, len(tripOrigins))
		for i, o := range tripOrigins {
			counts[i] = fmt.Sprint(n.Counts[o])
		}
		down := "-"
		if c, ok := o.PerNode[n.Node]; ok {
			down = fmt.Sprint(c)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", n.Node, latest, strings.Join(counts, "\t"), down)
	}
	tw.Flush()
}

// tripsLine is the one-line form: each node's latest origin.
func tripsLine(ts []nodeTrips) string {
	parts := make([]string, len(ts))
	for i, n := range ts {
		parts[i] = n.Node + ":" + strings.ReplaceAll(n.Origin, " ", "-")
	}
	return strings.Join(parts, " ")
}

// costBars draws the dead destination's measured calls beside the per-host
// estimate as two bars of one scale, width cells for the larger.
func costBars(measured, estimate, width int) (string, string) {
	top := max(measured, estimate, 1)
	bar := func(v int) string {
		n := (v*width + top - 1) / top
		return strings.Repeat("█", n) + strings.Repeat("░", width-n)
	}
	return bar(measured), bar(estimate)
}
