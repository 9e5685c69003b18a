package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/deliverybench"
	"fusebox/internal/testwait"
	"fusebox/transport"
)

// TestTasksBurstDoesNotHoldBackOtherDestinations: a burst for one saturated
// destination, larger than every shard's window together (16 shards × 1,000
// tasks held in memory), does not hold back another destination's tasks
// submitted after it. The burst's tasks whose turn is far off are written
// back due at it (queue/defer.go), and the windows keep room for the others
// (delivered about 0.1 s after their submit).
//
//   - rate-limited: 20 calls/s for each of 3 namespaces on each of 3 nodes.
//     Before queue/defer.go the other destination's tasks waited until the
//     burst had drained to the windows, (24,000 − 16,000) tasks at 180
//     calls/s: over 40 s (the 30 s deadline passed with none delivered).
//   - slow: no rate limit (1,000,000 calls/s), but every answer takes 1 s
//     and 10 calls are in flight per group: 90 calls/s in all. Before its
//     turn was estimated from its calls' time, such a key was never
//     deferred: 8,000 tasks at 90 calls/s, about 90 s. Then it answers at
//     once: its deferred tasks, due at turns minutes away, are recalled
//     and the burst drains in seconds.
//   - unanswering: as slow, but the answers take 8 s (under the 10 s
//     callback timeout). The other destination's tasks are delivered before
//     the burst's destination has answered once: its pace comes from the age
//     of its calls under way while every slot is busy (queue.callTimeAt).
//     Before that, it had no pace until its first answer, 8 s later.
//   - many namespaces: the burst spread over 40 namespaces at the default
//     limits (100 calls in flight and 100 buffered per namespace and node),
//     answers taking 8 s. No one key fills its buffer, so before each
//     destination had a share of the window (queue/share.go) every shard's
//     window filled with calls under way, none held and none deferred, and
//     the other destination's tasks waited for the first answers.
func TestTasksBurstDoesNotHoldBackOtherDestinations(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rps, conc  string
		namespaces int // 3 when 0
		answerTime time.Duration
		// beforeAnswers: the other tasks go before any answer of the burst's
		beforeAnswers bool
	}{
		{name: "rate-limited", rps: "20"},
		{name: "slow", rps: "1000000", conc: "10", answerTime: time.Second},
		{name: "unanswering", rps: "1000000", conc: "10", answerTime: 8 * time.Second, beforeAnswers: true},
		{name: "many namespaces", namespaces: 40, answerTime: 8 * time.Second, beforeAnswers: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const burst, others = 24000, 10
			c := newTaskCluster(t, 3)
			slow, fast := NewDest(t), NewDest(t)
			slow.SetHold(tc.answerTime)
			dest := transport.BreakerDestination(breakerpool.TaskGroupCallback, slow.CallbackURL())
			if tc.rps != "" {
				setConfig(t, c, keyRPS, dest, tc.rps)
			}
			if tc.conc != "" {
				setConfig(t, c, keyConcurrency, dest, tc.conc)
			}
			if tc.answerTime > 0 {
				// Well past the held answers: 8,000 calls opened at once
				// on a loaded machine can arrive a few seconds late, an 8 s
				// answer then passed the default 10 s timeout, six in a
				// row opened a namespace's breaker, and its tasks waited
				// for the breaker's 60 s Timeout (two CI runs failed so).
				setConfig(t, c, dynconfig.KeyCallbackRequestTimeout, dest, `"30s"`)
			}
			var clients []*api.Client
			for _, p := range c.Procs {
				clients = append(clients, p.Client())
			}
			tasks := make([]api.TaskSubmit, burst)
			for i := range tasks {
				tasks[i] = callbackTask(fmt.Sprintf("ns-%d", i%max(tc.namespaces, 3)), fmt.Sprintf("burst-%d", i), slow.CallbackURL(), i)
			}
			start := time.Now()
			deliverybench.SubmitAll(t, clients, tasks)
			t.Logf("%d tasks for one destination submitted in %v", burst, time.Since(start).Round(time.Millisecond))
			after := make([]api.TaskSubmit, others)
			for i := range after {
				after[i] = callbackTask("ns-0", fmt.Sprintf("other-%d", i), fast.CallbackURL(), i)
			}
			sent := time.Now()
			deliverybench.SubmitAll(t, clients, after)
			testwait.For(t, 30*time.Second, "the other destination's tasks delivered", func() bool { return len(fast.Deliveries()) == others })
			answered := 0
			for _, call := range slow.Calls() {
				if !call.Answered.IsZero() {
					answered++
				}
			}
			t.Logf("the other destination's %d tasks delivered %v after their submit; the burst's destination had %d calls, %d answered",
				others, time.Since(sent).Round(time.Millisecond), len(slow.Calls()), answered)
			if tc.beforeAnswers && answered > 0 {
				t.Fatalf("the other destination's tasks waited for %d answers of the burst's destination", answered)
			}
			if tc.answerTime > 0 {
				// It speeds up: its deferred tasks, due at turns up to
				// minutes away at its old pace, are recalled as its buffers
				// run dry (queue/recall.go) instead of leaving it idle.
				slow.SetHold(0)
				sped := time.Now()
				defer logDeferrals(t, c, func() int { return len(slow.Deliveries()) }, burst)
				testwait.For(t, 60*time.Second, "every burst task delivered after the speed-up", func() bool { return len(slow.Deliveries()) == burst })
				t.Logf("all %d burst tasks delivered %v after the destination sped up", burst, time.Since(sped).Round(time.Millisecond))
				recalled := 0.0
				for _, p := range c.Procs {
					m, err := scrapeMetrics(p)
					if err != nil {
						t.Fatal(err)
					}
					recalled += metricSum(m, "fusebox_queue_deferred_recalled_total")
				}
				t.Logf("%v deferred tasks recalled", recalled)
				if recalled == 0 {
					t.Fatal("no deferred task recalled")
				}
			}
			c.StopAll(t)
		})
	}
}

// logDeferrals logs, if the test failed, how far delivery got, each node's
// deferral, retry and breaker counters and the first pending tasks' turns
// and last answers: what a stall left.
func logDeferrals(t *testing.T, c *Cluster, delivered func() int, total int) {
	if !t.Failed() {
		return
	}
	t.Logf("delivered %d of %d", delivered(), total)
	for _, p := range c.Procs {
		m, err := scrapeMetrics(p)
		if err != nil {
			t.Logf("%s: %v", p.Name(), err)
			continue
		}
		t.Logf("%s: deferred %v, recalled %v, held for a share %v, pending %v, failed and retried %v, refused by a breaker %v", p.Name(),
			metricSum(m, "fusebox_queue_task_results_total", `outcome="deferred"`),
			metricSum(m, "fusebox_queue_deferred_recalled_total"),
			metricSum(m, "fusebox_queue_scheduler_rejections_total", `reason="destination_share"`),
			metricSum(m, "fusebox_queue_depth"),
			metricSum(m, "fusebox_queue_task_results_total", `outcome="retry_down"`),
			metricSum(m, "fusebox_queue_task_results_total", `outcome="retry_blocked"`))
	}
	list, err := c.Procs[0].Client().Tasks(context.Background(), api.TaskListQuery{Status: "pending", Limit: 20})
	if err != nil {
		t.Logf("pending tasks: %v", err)
		return
	}
	for _, tk := range list.Tasks {
		why := ""
		if a := tk.LastAnswer; a != nil {
			why += fmt.Sprintf(", last answer %d %q", a.HTTPStatus, a.Message)
		}
		if b := tk.Blocked; b != nil {
			why += fmt.Sprintf(", blocked (%s)", b.Reason)
		}
		t.Logf("pending %s (%s, shard %d): due in %v, %d attempts%s", tk.ID, tk.NamespaceID, tk.Shard,
			time.Until(tk.NextAttemptAt).Round(time.Millisecond), tk.Attempts, why)
	}
}
