package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
	"fusebox/raftstore/state"
)

// Exit codes of a followed task (tasks submit --wait).
const (
	exitTaskFailed  = 5 // failed or dead-lettered
	exitWaitTimeout = 6 // --timeout passed before the task ended
)

// submitAndWait submits body and polls the task until it ends or --timeout
// passes, reporting each new attempt on stderr.
func submitAndWait(cmd *cobra.Command, o *adminOpts, body api.TaskSubmit, names fieldNamer) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	acc, err := c.SubmitTask(ctx, body)
	if err != nil {
		return apiExit(connHint(c.Addr(), flagNamed(err, names)))
	}
	progress := cmd.ErrOrStderr()
	fmt.Fprintf(progress, "task %s accepted on shard %d; waiting for it to end (--timeout %v)\n", acc.TaskID, acc.Shard, o.timeout)
	t, err := followTask(ctx, c, acc.TaskID, func(t api.Task) {
		fmt.Fprintf(progress, "task %s: %s, attempt %d%s\n", t.ID, t.Status, t.Attempts, answerSuffix(t))
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &exitError{code: exitWaitTimeout, msg: fmt.Sprintf("task %s still %s after --timeout %v (%d attempts%s)", acc.TaskID, t.Status, o.timeout, t.Attempts, answerSuffix(t))}
		}
		return apiExit(connHint(c.Addr(), err))
	}
	if perr := o.print(cmd.OutOrStdout(), t, func(tw *tabwriter.Writer) { taskDetail(tw, t) }); perr != nil {
		return perr
	}
	if t.Status != state.TaskSucceeded {
		return &exitError{code: exitTaskFailed, msg: fmt.Sprintf("task %s %s after %d attempts%s", t.ID, t.Status, t.Attempts, answerSuffix(t))}
	}
	return nil
}

// followTask polls the task until it is no longer pending; onChange sees
// every new status or attempt count. It returns the last state read.
func followTask(ctx context.Context, c *api.Client, id string, onChange func(api.Task)) (api.Task, error) {
	var last api.Task
	seen := false
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		t, err := c.Task(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		if !seen || t.Status != last.Status || t.Attempts != last.Attempts {
			onChange(t)
		}
		last, seen = t, true
		if t.Status != state.TaskPending {
			return t, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

func answerSuffix(t api.Task) string {
	if t.LastAnswer == nil {
		return ""
	}
	return ": last answer " + lastAnswer(t.LastAnswer)
}

// watchRedriven follows redriven tasks until none is pending, printing the
// tally on stderr whenever it changes.
func watchRedriven(cmd *cobra.Command, o *adminOpts, ids []string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	progress := cmd.ErrOrStderr()
	status := map[string]string{}
	var last string
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		counts := map[string]int{}
		for _, id := range ids {
			if s := status[id]; s != "" && s != state.TaskPending {
				counts[s]++
				continue
			}
			t, err := c.Task(ctx, id)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				return apiExit(connHint(c.Addr(), err))
			}
			status[id] = t.Status
			counts[t.Status]++
		}
		tally := fmt.Sprintf("pending %d, succeeded %d, failed %d, dlq %d", counts[state.TaskPending],
			counts[state.TaskSucceeded], counts[state.TaskFailed], counts[state.TaskDLQ])
		if tally != last {
			fmt.Fprintf(progress, "redriven tasks: %s\n", tally)
			last = tally
		}
		if ctx.Err() != nil {
			return &exitError{code: exitWaitTimeout, msg: fmt.Sprintf("--timeout %v passed while following %d redriven tasks (%s)", o.timeout, len(ids), tally)}
		}
		if counts[state.TaskPending] == 0 {
			if bad := counts[state.TaskFailed] + counts[state.TaskDLQ]; bad > 0 {
				return &exitError{code: exitTaskFailed, msg: fmt.Sprintf("%d of %d redriven tasks did not succeed (%s); fusebox admin dlq list shows why", bad, len(ids), tally)}
			}
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}
