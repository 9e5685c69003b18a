package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

// tasksCmd is `fusebox admin tasks submit|get|list|export|import`.
func tasksCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Enqueue outbound tasks and inspect their status",
	}
	var in api.TaskSubmit
	var reqArg, fileArg string
	var wait bool
	submit := &cobra.Command{
		Use:   "submit",
		Short: "Enqueue one outbound task (accepted = committed to Raft)",
		Example: `  fusebox admin tasks submit --namespace ns-1 --workflow wf-7 --task-group nexusoperations.Invocation \
      --destination my-endpoint --request '{"service":"svc","operation":"op","input":{"x":1}}'
  fusebox admin tasks submit --namespace ns-1 --workflow wf-7 --task-group callbacks.Invocation \
      --destination https://example.com/cb --request '{"completion":{"state":"succeeded"}}' --request-id cb-42
  fusebox admin tasks submit --file task.json     # the whole POST /v1/tasks body; - reads stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := in
			if fileArg != "" {
				if err := decodeArg(cmd.InOrStdin(), "--file", fileArg, &body); err != nil {
					return err
				}
			}
			if reqArg != "" {
				if err := decodeArg(cmd.InOrStdin(), "--request", reqArg, &body.Request); err != nil {
					return err
				}
			}
			names := fieldNamer{cmd: cmd, fields: submitFields, file: fileArg != ""} // admin_flags.go
			if err := checkSubmit(names, body); err != nil {
				return err
			}
			if wait {
				return submitAndWait(cmd, o, body, names)
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				acc, err := c.SubmitTask(ctx, body)
				return acc, func(tw *tabwriter.Writer) {
					what := "accepted"
					if acc.Duplicate {
						what = "duplicate of an earlier submit"
					}
					fmt.Fprintf(tw, "task %s on shard %d (%s)\n", acc.TaskID, acc.Shard, what)
				}, flagNamed(err, names)
			})
		},
	}
	f := submit.Flags()
	f.StringVar(&in.NamespaceID, "namespace", "", "namespace id")
	f.StringVar(&in.WorkflowID, "workflow", "", "workflow id (with the namespace, picks the shard)")
	f.StringVar(&in.TaskGroup, "task-group", "", "nexusoperations.Invocation, nexusoperations.Cancelation or callbacks.Invocation")
	f.StringVar(&in.Destination, "destination", "", "Nexus endpoint name, or the callback URL")
	f.StringVar(&in.RequestID, "request-id", "", "idempotency key within the namespace")
	f.StringVar(&reqArg, "request", "", "the request as JSON (service, operation, input, operation_id, completion, body, header…); @file reads a file")
	f.StringVar(&fileArg, "file", "", "read the whole submit body (JSON) from this file, - for stdin; flags given too override it")
	f.StringVar(&in.ScheduleToCloseTimeout, "schedule-to-close", "",
		`how long the task may take to be delivered ("30s", "2h", "1d"; unitless: seconds); undelivered by then it fails "deadline exceeded" (default: fusebox.tasks.defaultScheduleToCloseTimeout)`)
	f.BoolVar(&wait, "wait", false, "follow the task to its end (progress on stderr, bounded by --timeout): exit 0 when it succeeded, 5 when it failed or was dead-lettered (the reason is printed), 6 when --timeout passed first")

	get := &cobra.Command{
		Use:   "get TASK_ID",
		Short: "Show a task: status, attempts, next attempt, last answer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				t, err := c.Task(ctx, args[0])
				return t, func(tw *tabwriter.Writer) { taskDetail(tw, t) }, err
			})
		},
	}

	var q api.TaskListQuery
	var shard int
	list := &cobra.Command{
		Use:   "list",
		Short: "List tasks in id (creation) order, optionally by shard and status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("shard") {
				q.Shard = &shard
			}
			names := fieldNamer{cmd: cmd, fields: listFields}
			if err := checkList(names, q.Status, q.Limit, q.Shard); err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				l, err := c.Tasks(ctx, q)
				return l, func(tw *tabwriter.Writer) { taskTable(tw, l) }, flagNamed(err, names)
			})
		},
	}
	lf := list.Flags()
	lf.IntVar(&shard, "shard", 0, "only this shard")
	lf.StringVar(&q.Status, "status", "", "only this status: pending, blocked (pending, refused by an open circuit breaker), succeeded, failed or dlq")
	pageFlags(list, &q.After, &q.Limit)
	cmd.AddCommand(submit, get, list, tasksExportCmd(o), tasksImportCmd(o)) // admin_tasks_move.go
	return cmd
}

// dlqCmd is `fusebox admin dlq list|redrive`.
func dlqCmd(o *adminOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and redrive dead-lettered (poison) tasks",
	}
	var after string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered tasks with the reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			names := fieldNamer{cmd: cmd, fields: listFields}
			if err := checkList(names, "", limit, nil); err != nil {
				return err
			}
			return o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				l, err := c.DLQ(ctx, after, limit)
				return l, func(tw *tabwriter.Writer) { taskTable(tw, l) }, flagNamed(err, names)
			})
		},
	}
	pageFlags(list, &after, &limit)
	var all, watch bool
	redrive := &cobra.Command{
		Use:   "redrive [TASK_ID...]",
		Short: "Move dead-lettered tasks back to pending (attempts reset): the ids given, or --all",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return &exitError{code: 2, msg: "give task ids or --all (not both)"}
			}
			var r api.RedriveResult
			err := o.call(cmd, func(ctx context.Context, c *api.Client) (any, func(*tabwriter.Writer), error) {
				var err error
				if all {
					r, err = redriveAll(ctx, c, cmd.ErrOrStderr())
				} else {
					r, err = c.Redrive(ctx, api.Redrive{IDs: args})
				}
				return r, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "redrove %d task(s)\n", r.Count)
					for _, id := range r.Redriven {
						fmt.Fprintln(tw, id)
					}
					if r.More {
						fmt.Fprintln(tw, "more tasks remain in the DLQ; run it again")
					}
				}, err
			})
			if err != nil || !watch {
				return err
			}
			return watchRedriven(cmd, o, r.Redriven) // admin_wait.go
		},
	}
	redrive.Flags().BoolVar(&all, "all", false, "redrive every dead-lettered task")
	redrive.Flags().BoolVar(&watch, "watch", false, "then follow the redriven tasks to their end (progress on stderr, bounded by --timeout): exit 0 when all succeeded, 5 when any failed or went back to the DLQ, 6 when --timeout passed first")
	cmd.AddCommand(list, redrive)
	return cmd
}

// redrivePage is how many dead-lettered tasks one redrive round takes.
const redrivePage = 500

// redriveAll empties the DLQ a page at a time, printing the running count
// to progress (stderr, so --json stays one document on stdout) after each
// page, so a long redrive shows that it moves.
func redriveAll(ctx context.Context, c *api.Client, progress io.Writer) (api.RedriveResult, error) {
	var redriven []string
	err := func() error {
		seen := map[string]bool{}
		for {
			l, err := c.DLQ(ctx, "", redrivePage)
			if err != nil {
				return err
			}
			var ids []string
			for _, t := range l.Tasks {
				if !seen[t.ID] {
					seen[t.ID] = true
					ids = append(ids, t.ID)
				}
			}
			if len(ids) == 0 {
				// Empty, or only tasks already redriven once (dead-lettered
				// again at once, or a concurrent redrive): done, no spinning.
				return nil
			}
			r, err := c.Redrive(ctx, api.Redrive{IDs: ids})
			redriven = append(redriven, r.Redriven...)
			if err != nil {
				return err
			}
			fmt.Fprintf(progress, "redriven %d so far\n", len(redriven))
		}
	}()
	return api.RedriveResult{Redriven: redriven, Count: len(redriven)}, err
}

func pageFlags(c *cobra.Command, after *string, limit *int) {
	c.Flags().StringVar(after, "after", "", "start after this task id (the previous page's NEXT)")
	c.Flags().IntVar(limit, "limit", 100, "at most this many tasks (max 1000)")
}

// decodeArg decodes JSON given inline, as @file, or as - (stdin), naming
// the flag on error.
func decodeArg(stdin io.Reader, flag, arg string, v any) error {
	var data []byte
	var err error
	switch {
	case arg == "-":
		data, err = io.ReadAll(io.LimitReader(stdin, 8<<20))
	case strings.HasPrefix(arg, "@"):
		data, err = os.ReadFile(arg[1:])
	case flag == "--file":
		data, err = os.ReadFile(arg)
	default:
		data = []byte(arg)
	}
	if err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("%s: %v", flag, err)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("%s: not a valid JSON body: %v", flag, err)}
	}
	return nil
}

func taskTable(tw *tabwriter.Writer, l api.TaskList) {
	fmt.Fprintln(tw, "ID\tSHARD\tSTATUS\tATTEMPTS\tTASK GROUP\tNAMESPACE\tDESTINATION\tLAST ANSWER")
	for _, t := range l.Tasks {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Shard, taskStatus(t), t.Attempts, t.TaskGroup, t.NamespaceID,
			t.Destination, lastAnswer(t.LastAnswer))
	}
	if l.Next != "" {
		fmt.Fprintf(tw, "\nNEXT\t%s\n", l.Next)
	}
}

func taskDetail(tw *tabwriter.Writer, t api.Task) {
	at := func(ts time.Time) string {
		if ts.IsZero() {
			return "-"
		}
		return ts.Format(time.RFC3339Nano)
	}
	rows := [][2]string{
		{"ID", t.ID}, {"SHARD", fmt.Sprint(t.Shard)}, {"STATUS", taskStatus(t)}, {"ATTEMPTS", fmt.Sprint(t.Attempts)},
		{"BLOCKED", blockedDetail(t.Blocked, at)},
		{"NEXT ATTEMPT", at(t.NextAttemptAt)}, {"LAST ANSWER", lastAnswer(t.LastAnswer)},
		{"TASK GROUP", t.TaskGroup}, {"NAMESPACE", t.NamespaceID}, {"WORKFLOW", t.WorkflowID},
		{"DESTINATION", t.Destination}, {"REQUEST ID", orDash(t.RequestID)}, {"OPERATION ID", orDash(t.OperationID)},
		{"CREATED", at(t.CreatedAt)}, {"COMPLETED", at(t.CompletedAt)}, {"DEADLINE", at(t.Deadline)},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
}

// taskStatus is the status, with "(blocked)" while an open circuit breaker
// holds a pending task (Temporal's BLOCKED).
func taskStatus(t api.Task) string {
	if t.Blocked != nil {
		return t.Status + " (blocked)"
	}
	return t.Status
}

func blockedDetail(b *api.TaskBlocked, at func(time.Time) string) string {
	if b == nil {
		return "-"
	}
	return b.Reason + ", until " + at(b.Until)
}

func lastAnswer(a *api.TaskAnswer) string {
	if a == nil {
		return "-"
	}
	msg := a.Message
	if len(msg) > 80 {
		msg = msg[:80] + "…"
	}
	if a.HTTPStatus != 0 {
		return fmt.Sprintf("%d %s", a.HTTPStatus, msg)
	}
	return msg
}
