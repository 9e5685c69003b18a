package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
)

// Task statuses (GET /v1/tasks/{id}).
const (
	statusPending   = "pending"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
)

// TaskReport is what checking a load found.
type TaskReport struct {
	Accepted  int
	Succeeded int
	// Failed is the tasks that ended failed with the status the load
	// allowed (AllowFailedWith), each answered so by its destination.
	Failed int
	// Calls is every call the destinations saw for these tasks, whatever
	// the answer; Deliveries the delivered (2xx) ones.
	Calls      int
	Deliveries int
	// Duplicates is the deliveries beyond each task's first; DupTasks the
	// tasks delivered more than once.
	Duplicates int
	DupTasks   []string
	// P50 and P99 are creation → completion of the succeeded tasks.
	P50, P99 time.Duration
}

func (r TaskReport) String() string {
	failed := ""
	if r.Failed > 0 {
		failed = fmt.Sprintf(" (failed with the allowed answer %d)", r.Failed)
	}
	return fmt.Sprintf("accepted %d, succeeded %d%s, calls %d, deliveries %d, duplicate deliveries %d (%d tasks), created→done p50 %v p99 %v",
		r.Accepted, r.Succeeded, failed, r.Calls, r.Deliveries, r.Duplicates, len(r.DupTasks), r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond))
}

// WaitTerminal waits until a live node lists every accepted task as
// terminal, and returns that node's view. A task that ends in another
// state than succeeded fails the test at once (every scenario submits
// deliverable tasks); one still pending at the timeout fails it with the
// stuck tasks, their shards' owners and the load's figures as evidence.
func (l *TaskLoad) WaitTerminal(t testing.TB, timeout time.Duration) map[string]api.Task {
	t.Helper()
	acc := l.Accepted()
	var view map[string]api.Task
	testwait.ForErr(t, timeout, fmt.Sprintf("all %d accepted tasks of %s* terminal", len(acc), l.prefix), func() error {
		p, err := l.pick()
		if err != nil {
			return err
		}
		all, err := listAllTasks(p, l.prefix)
		if err != nil {
			return err
		}
		var missing, pending []string
		l.mu.Lock()
		failedWith := l.failedWith
		l.mu.Unlock()
		for _, a := range acc {
			task, ok := all[a.ID]
			switch {
			case !ok:
				missing = append(missing, a.ID)
			case task.Status == statusPending:
				pending = append(pending, describeTask(task))
			case task.Status == statusFailed && failedWith != 0 && task.LastAnswer != nil && task.LastAnswer.HTTPStatus == failedWith:
				// allowed (AllowFailedWith); Check matches it with the front's calls
			case task.Status != statusSucceeded:
				t.Fatalf("task %s ended %s, want %s: %s", a.ID, task.Status, statusSucceeded, describeTask(task))
			}
		}
		if len(missing)+len(pending) == 0 {
			view = all
			return nil
		}
		return fmt.Errorf("on %s: %d accepted tasks missing %v, %d pending, e.g.:\n  %s\nshards: %s\nsubmits: %v",
			p.Name(), len(missing), first(missing, 5), len(pending), strings.Join(first(pending, 10), "\n  "), shardSummary(p), l.Stats())
	})
	return view
}

// Check is the task invariant, run by CheckInvariants for every load of
// the cluster: the stream is stopped; every accepted task is terminal
// (succeeded) on every live node, with the same completion everywhere; no
// task carries one of the load's request ids without having been
// submitted (a phantom); every task reached its destination at least once.
// It returns the figures, duplicates included, for the scenario to judge.
func (l *TaskLoad) Check(t testing.TB, timeout time.Duration) TaskReport {
	t.Helper()
	l.Stop()
	view := l.WaitTerminal(t, timeout)
	acc := l.Accepted()
	l.mu.Lock()
	attempted, badDup := l.attempted, l.badDup
	l.mu.Unlock()
	if len(badDup) > 0 {
		t.Errorf("first submit of %d request ids answered duplicate (never submitted before): %v", len(badDup), first(badDup, 10))
	}
	testwait.ForErr(t, timeout, "every live node to list the same terminal tasks", func() error {
		for _, p := range l.c.Live() {
			all, err := listAllTasks(p, l.prefix)
			if err != nil {
				return err
			}
			for _, a := range acc {
				got, ok := all[a.ID]
				want := view[a.ID]
				if !ok || got.Status != want.Status || !got.CompletedAt.Equal(want.CompletedAt) {
					return fmt.Errorf("%s: task %s is %s, another node has %s", p.Name(), a.ID, describeTask(got), describeTask(want))
				}
			}
			for id, task := range all {
				if !attempted[task.RequestID] {
					return fmt.Errorf("%s: phantom task %s with request id %s never submitted", p.Name(), id, task.RequestID)
				}
			}
		}
		return nil
	})

	rep := TaskReport{Accepted: len(acc)}
	deliveries := map[*Dest]map[string]int{}
	calls := map[*Dest]map[string]int{}
	answered := map[*Dest]map[string]map[int]bool{} // the statuses each task's calls got
	var undelivered, unanswered []string
	var lat []time.Duration
	for _, a := range acc {
		task := view[a.ID]
		if task.Status == statusSucceeded {
			rep.Succeeded++
			lat = append(lat, task.CompletedAt.Sub(task.CreatedAt))
		}
		if a.Dest == nil {
			continue
		}
		if deliveries[a.Dest] == nil {
			deliveries[a.Dest] = a.Dest.Deliveries()
			calls[a.Dest] = map[string]int{}
			answered[a.Dest] = map[string]map[int]bool{}
			for _, c := range a.Dest.Calls() {
				calls[a.Dest][c.RequestID]++
				if answered[a.Dest][c.RequestID] == nil {
					answered[a.Dest][c.RequestID] = map[int]bool{}
				}
				answered[a.Dest][c.RequestID][c.Status] = true
			}
		}
		if task.Status == statusFailed {
			rep.Failed++
			if !answered[a.Dest][a.ID][task.LastAnswer.HTTPStatus] {
				unanswered = append(unanswered, describeTask(task))
			}
		}
		n := deliveries[a.Dest][a.ID]
		rep.Calls += calls[a.Dest][a.ID]
		rep.Deliveries += n
		switch {
		case n == 0 && task.Status == statusSucceeded:
			undelivered = append(undelivered, describeTask(task))
		case n > 1:
			rep.Duplicates += n - 1
			rep.DupTasks = append(rep.DupTasks, a.ID)
		}
	}
	if len(unanswered) > 0 {
		t.Errorf("%d tasks ended failed with an answer their destination never gave them, e.g. %v", len(unanswered), first(unanswered, 5))
	}
	if len(undelivered) > 0 {
		t.Errorf("%d tasks succeeded without a delivered call at their destination (by request id = task id), e.g. %v",
			len(undelivered), first(undelivered, 5))
	}
	rep.P50, rep.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return rep
}

// percentile is the q-quantile of ds (0 if empty).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// first returns at most n elements of s.
func first[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// shardSummary renders p's shard map for evidence: owner:epoch per shard.
func shardSummary(p *Process) string {
	sl, err := p.Client().Shards(context.Background())
	if err != nil {
		return err.Error()
	}
	owners := map[string][]string{}
	for _, s := range sl.Shards {
		owners[s.Owner] = append(owners[s.Owner], fmt.Sprintf("%d@%d", s.Shard, s.Epoch))
	}
	var parts []string
	for o, ss := range owners {
		parts = append(parts, fmt.Sprintf("%s=%v", o, ss))
	}
	sort.Strings(parts)
	return fmt.Sprintf("v%d %s", sl.Version, strings.Join(parts, " "))
}
