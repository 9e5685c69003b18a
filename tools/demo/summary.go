package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"fusebox/api"
)

// maxTaskPages bounds the task listing (1000 tasks a page).
const maxTaskPages = 200

// NodeSummary is one node of the summary.
type NodeSummary struct {
	ID    string
	Pids  []int
	Ready bool // answered /readyz during start-up
}

// Summary is what a demo run did; printed at the end and checked by the
// test.
type Summary struct {
	// Dir held the nodes' data and logs; DirRemoved says it is gone.
	Dir        string
	DirRemoved bool
	Nodes      []NodeSummary
	NodesReady int
	// Ran is how long the workload ran.
	Ran time.Duration
	// Submitted counts accepted tasks per destination; SubmitFailed and
	// Overloaded the tasks that were not queued.
	Submitted    map[string]int
	SubmitFailed int
	Overloaded   int
	// Tasks counts the cluster's tasks by status, read once the workload
	// stopped and before the nodes stop (nil, with TasksErr, if that
	// failed). Tasks still run meanwhile; each is counted once.
	Tasks    map[string]int
	TasksErr string
	// Received counts the Nexus start requests each destination's server
	// handled, Delivered the distinct tasks it answered 200, Duplicates
	// the 200 answers beyond a task's first (at-least-once delivery).
	Received, Delivered, Duplicates map[string]int
	Outage                          outageView
	// Transitions counts breaker transitions over all nodes, from the
	// nodes' fusebox_breaker_transitions_total, by "destination from→to".
	Transitions map[string]int
	// Events are the breaker changes the live view saw.
	Events []event
	// Trips are each node's flaky openings by origin (local failures, a
	// failed probe, a peer's hint, an operator), from the nodes' timelines.
	Trips []nodeTrips
	// Fleet is the fleet features' trace at the end (fleet.go).
	Fleet fleetView
	// StopErr describes nodes that did not stop cleanly; LeftRunning the
	// ones whose process was still alive after the teardown (should be
	// empty).
	StopErr     string
	LeftRunning []string
	// Err is the error that ended the run early, if any.
	Err string
}

func newSummary() *Summary {
	return &Summary{Received: map[string]int{}, Delivered: map[string]int{}, Duplicates: map[string]int{}}
}

// transitionsFrom sums the transition counters of the snapshot's nodes.
func transitionsFrom(s snapshot) map[string]int {
	out := map[string]int{}
	for _, n := range s.Nodes {
		for _, sm := range n.metrics[metricBreakerTransitions] {
			k := fmt.Sprintf("%s %s→%s", sm.Labels["destination"], sm.Labels["from"], sm.Labels["to"])
			out[k] += int(sm.Value)
		}
	}
	return out
}

// countTasks pages through every task once, in id order, and counts them
// by status. (Listing status by status would count a task that completes
// in between twice.)
func countTasks(ctx context.Context, cl *cluster) (map[string]int, error) {
	out := map[string]int{}
	after := ""
	for page := 0; ; page++ {
		if page == maxTaskPages {
			return out, fmt.Errorf("more than %d pages of tasks", maxTaskPages)
		}
		var list api.TaskList
		err := cl.call(ctx, 0, func(ctx context.Context, c *api.Client) (err error) {
			list, err = c.Tasks(ctx, api.TaskListQuery{After: after, Limit: api.MaxTaskListLimit})
			return err
		})
		if err != nil {
			return out, fmt.Errorf("list tasks: %w", err)
		}
		for _, t := range list.Tasks {
			out[t.Status]++
		}
		if list.Next == "" || len(list.Tasks) == 0 {
			return out, nil
		}
		after = list.Next
	}
}

// BreakerOpened reports whether some flaky breaker opened during the run,
// by the nodes' counters or the view's events.
func (s *Summary) BreakerOpened() bool {
	for k, n := range s.Transitions {
		if strings.HasPrefix(k, destFlaky+" ") && strings.HasSuffix(k, "→open") && n > 0 {
			return true
		}
	}
	for _, e := range s.Events {
		if e.Dest == destFlaky && strings.Contains(e.What, "open (") {
			return true
		}
	}
	return false
}

// String renders the summary for people.
func (s *Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n==== fusebox demo summary (workload ran %v) ====\n", s.Ran.Round(time.Second))
	if s.Err != "" {
		fmt.Fprintf(&b, "stopped early: %s\n", s.Err)
	}
	var ids []string
	for _, n := range s.Nodes {
		ids = append(ids, fmt.Sprintf("%s pid %v", n.ID, n.Pids))
	}
	fmt.Fprintf(&b, "nodes:        %d of %d came up (%s)\n", s.NodesReady, len(s.Nodes), strings.Join(ids, ", "))
	switch {
	case len(s.LeftRunning) > 0:
		fmt.Fprintf(&b, "              STILL RUNNING after teardown: %s\n", strings.Join(s.LeftRunning, ", "))
	case s.StopErr != "":
		fmt.Fprintf(&b, "              all stopped, not all cleanly: %s\n", s.StopErr)
	default:
		b.WriteString("              all stopped cleanly\n")
	}
	total := s.Submitted[destHealthy] + s.Submitted[destFlaky]
	fmt.Fprintf(&b, "submitted:    %d tasks accepted (healthy %d, flaky %d) · not queued: %d failed, %d overloaded",
		total, s.Submitted[destHealthy], s.Submitted[destFlaky], s.SubmitFailed, s.Overloaded)
	b.WriteString("\n")
	if s.Tasks != nil {
		fmt.Fprintf(&b, "tasks:        succeeded %d · pending %d · failed %d · dlq %d (cluster state at the end)\n",
			s.Tasks["succeeded"], s.Tasks["pending"], s.Tasks["failed"], s.Tasks["dlq"])
	}
	if s.TasksErr != "" {
		fmt.Fprintf(&b, "tasks:        could not count: %s\n", s.TasksErr)
	}
	for _, name := range []string{destHealthy, destFlaky} {
		fmt.Fprintf(&b, "%-14s%d distinct tasks delivered · %d requests received · %d duplicate deliveries\n",
			name+":", s.Delivered[name], s.Received[name], s.Duplicates[name])
	}
	o := s.Outage
	switch o.Phase {
	case phaseDown, phaseOver:
		fmt.Fprintf(&b, "outage:       flaky %s for %.0fs from %s", o.Mode, o.Elapsed.Seconds(), fmtT(o.At))
		if o.Phase == phaseDown {
			b.WriteString(" (the demo ended during it)")
		}
		fmt.Fprintf(&b, "\n              calls that reached the dead destination (measured): %d\n", o.Calls)
		fmt.Fprintf(&b, "              per-host breakers, gossip off (ESTIMATE): %d = %s\n", o.Estimate, o.Formula)
		fmt.Fprintf(&b, "              flaky tasks submitted meanwhile: %d; refused by open breakers: %d\n", o.TasksSubmitted, o.Rejected)
	default:
		fmt.Fprintf(&b, "outage:       %s (it was due at %s)\n", o.Phase, fmtT(o.At))
	}
	writeFleetSummary(&b, s.Fleet)
	b.WriteString("transitions:  all nodes, from fusebox_breaker_transitions_total\n")
	for _, dest := range []string{destHealthy, destFlaky} {
		var tr []string
		for _, k := range sortedKeys(s.Transitions) {
			if t, ok := strings.CutPrefix(k, dest+" "); ok {
				tr = append(tr, fmt.Sprintf("%s %d", t, s.Transitions[k]))
			}
		}
		if len(tr) == 0 {
			tr = []string{"none"}
		}
		fmt.Fprintf(&b, "              %-8s %s\n", dest+":", strings.Join(tr, " · "))
	}
	fmt.Fprintf(&b, "events seen:  %d breaker changes in the live view\n", len(s.Events))
	for i, n := range s.Trips {
		label := ""
		if i == 0 {
			label = "flaky opened:"
		}
		var parts []string
		for _, o := range tripOrigins {
			if c := n.Counts[o]; c > 0 {
				parts = append(parts, fmt.Sprintf("%d × %s", c, o))
			}
		}
		fmt.Fprintf(&b, "%-14s%s %s\n", label, n.Node, strings.Join(parts, ", "))
	}
	if s.Dir != "" && !s.DirRemoved {
		fmt.Fprintf(&b, "data & logs:  %s (kept)\n", s.Dir)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
