package state

import (
	"cmp"
	"slices"
)

// DestinationCount is the task counts of one (namespace, breaker
// destination), for the status page (GET /v1/tasks/_counts).
type DestinationCount struct {
	Namespace string
	// Destination is the breaker destination the backlog limits count by
	// (a callback's scheme://host, a Nexus endpoint's name). A row stored
	// before breaker destinations were recorded counts under its full
	// destination: callers redact it before showing it.
	Destination string
	// Pending is the destination's backlog: its pending tasks (exact).
	Pending int
	// Blocked is the pending tasks an open breaker refused (Task.IsBlocked).
	Blocked int
	// DLQ is the tasks in the dead-letter queue.
	DLQ int
}

// DestinationCounts returns the task counts of every destination with a
// pending or dead-lettered task on this replica, busiest first (pending
// plus DLQ, then namespace and destination). Pending is exact (the
// backlog counters); Blocked and DLQ come from walking the pending rows and
// the DLQ rows, each walk stopped after maxScan rows: partial is true when
// one stopped early, and those two counts are then lower bounds. O(number of
// destinations + 2 × maxScan) on a read view, without locks.
func (s *State) DestinationCounts(maxScan int) (out []DestinationCount, partial bool) {
	tt := s.tasks.Load()
	type key struct{ namespace, destination string }
	by := map[key]*DestinationCount{}
	get := func(namespace, destination string) *DestinationCount {
		k := key{namespace, destination}
		c, ok := by[k]
		if !ok {
			c = &DestinationCount{Namespace: namespace, Destination: destination}
			by[k] = c
		}
		return c
	}
	tt.pendingBy.Scan(func(c pendingCount) bool {
		get(c.namespace, c.destination).Pending = c.n
		return true
	})
	scanned := 0
	tt.due.Scan(func(t *Task) bool {
		if scanned == maxScan {
			partial = true
			return false
		}
		scanned++
		if t.IsBlocked() {
			get(t.NamespaceID, t.destination()).Blocked++
		}
		return true
	})
	scanned = 0
	tt.status.Ascend(&Task{Status: TaskDLQ}, func(t *Task) bool {
		if t.Status != TaskDLQ {
			return false
		}
		if scanned == maxScan {
			partial = true
			return false
		}
		scanned++
		get(t.NamespaceID, t.destination()).DLQ++
		return true
	})
	out = make([]DestinationCount, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b DestinationCount) int {
		if c := cmp.Compare(b.Pending+b.DLQ, a.Pending+a.DLQ); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(a.Destination, b.Destination)
	})
	return out, partial
}
