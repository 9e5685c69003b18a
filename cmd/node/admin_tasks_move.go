package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
)

// Moving pending tasks between clusters (issue 18; docs/scaling.md,
// "Moving to the postgres store"): `tasks export` pages GET
// /v1/tasks:export into a JSON Lines file, `tasks import` posts the file to
// POST /v1/tasks:import in batches. Both are admin-only routes: the file
// holds the requests as stored, secret headers included.

const (
	// importBatchBytes bounds one import call's encoded tasks, under the
	// API's 1 MiB body limit (a larger single task is sent alone).
	importBatchBytes = 768 << 10
	// maxExportLine bounds one line of an import file (a task's request is
	// at most 256 KiB; its JSON with escapes stays well under this).
	maxExportLine = 4 << 20
	// importRetries bounds the retries of a batch the cluster could not
	// take right now (503, 429): an import is idempotent, so a retry is safe.
	importRetries = 10
)

// secretNote is what both commands say about the file.
const secretNote = "the file holds the tasks' requests as stored, secret header values and URL queries included: keep it like a credential and delete it after the import"

func tasksExportCmd(o *adminOpts) *cobra.Command {
	var output string
	var page int
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the cluster's pending tasks as JSON Lines, to move them to another cluster (admin)",
		Long: `Write every pending task (request as stored, attempts, next attempt, deadline,
request id, task id) as one JSON object a line, paging GET /v1/tasks:export.
Progress goes to stderr. ` + secretNote + `.
A file given with --output is written with mode 0600 (one already there is
replaced, whatever its mode; a failed export leaves it as it was). Tasks submitted or
delivered while the export runs may or may not be in it: stop submitters first
(docs/scaling.md, "Moving to the postgres store").`,
		Example: `  fusebox admin tasks export --output pending.jsonl
  fusebox admin tasks import --input pending.jsonl --addr http://new-cluster:8470`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if page < 1 || page > api.MaxTaskListLimit {
				return &exitError{code: 2, msg: fmt.Sprintf("--page-size: want 1..%d, got %d", api.MaxTaskListLimit, page)}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			out, closeOut, err := openOutput(cmd, output)
			if err != nil {
				return err
			}
			n, err := exportTasks(cmd.Context(), c, o.timeout, page, out, cmd.ErrOrStderr())
			if cerr := closeOut(err != nil); err == nil {
				err = cerr
			}
			if err != nil {
				return apiExit(connHint(c.Addr(), tlsHint(c.Addr(), err)))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d pending task(s); %s\n", n, secretNote)
			if output == "-" {
				return nil // stdout is the file
			}
			return o.print(cmd.OutOrStdout(), map[string]any{"exported": n, "file": output}, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "exported %d pending task(s) to %s\n", n, output)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "-", "the file to write (mode 0600), - for stdout")
	cmd.Flags().IntVar(&page, "page-size", 500, "tasks per page read")
	return cmd
}

// openOutput opens --output: stdout for "-", else a privateFile, so the
// file is mode 0600 even where one of another mode was. Its closer is told
// whether the export failed: a file is then discarded (what was at path
// stays), stdout is flushed as far as it got.
func openOutput(cmd *cobra.Command, path string) (*bufio.Writer, func(failed bool) error, error) {
	if path == "-" {
		w := bufio.NewWriter(cmd.OutOrStdout())
		return w, func(bool) error { return w.Flush() }, nil
	}
	f, err := createPrivate(path) // mode 0600 even over an existing file of another mode
	if err != nil {
		return nil, nil, &exitError{code: 2, msg: fmt.Sprintf("--output: %v", err)}
	}
	w := bufio.NewWriter(f)
	return w, func(failed bool) error {
		if failed {
			f.Discard()
			return nil
		}
		if err := w.Flush(); err != nil {
			f.Discard()
			return err
		}
		return f.Commit()
	}, nil
}

// exportTasks pages the pending tasks into out, one JSON object a line,
// each page bounded by timeout, and returns how many it wrote.
func exportTasks(ctx context.Context, c *api.Client, timeout time.Duration, page int, out io.Writer, progress io.Writer) (int, error) {
	enc := json.NewEncoder(out) // one line per Encode
	n, after := 0, ""
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		p, err := c.ExportTasks(pctx, after, page)
		cancel()
		if err != nil {
			return n, err
		}
		for i := range p.Tasks {
			if err := enc.Encode(&p.Tasks[i]); err != nil {
				return n, err
			}
		}
		n += len(p.Tasks)
		fmt.Fprintf(progress, "exported %d so far\n", n)
		if p.Next == "" {
			return n, nil
		}
		after = p.Next
	}
}

func tasksImportCmd(o *adminOpts) *cobra.Command {
	var input string
	var batch int
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Insert tasks written by `tasks export` into this cluster, keeping their ids (admin)",
		Long: `Read the JSON Lines file of 'fusebox admin tasks export' and insert its tasks
(POST /v1/tasks:import), each with its task id, request id, attempts, next
attempt and deadline. Idempotent: a task whose id (or namespace and request id)
the cluster already has is a duplicate and nothing is added, so a run that
stopped half-way can be run again. Each task is validated as a submit is (its
Nexus endpoint must be registered here, a callback URL must pass the
namespace's allowlist); the first refused task stops the run naming its line.
Either task store can import: a Raft-store cluster needs every server on a
build that knows the import command (log version 6), and answers 409
upgrade_pending until then. Progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch < 1 || batch > api.MaxTaskBatchSubmit {
				return &exitError{code: 2, msg: fmt.Sprintf("--batch: want 1..%d, got %d", api.MaxTaskBatchSubmit, batch)}
			}
			in := cmd.InOrStdin()
			if input != "-" {
				f, err := os.Open(input)
				if err != nil {
					return &exitError{code: 2, msg: fmt.Sprintf("--input: %v", err)}
				}
				defer f.Close()
				in = f
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			im := &importer{c: c, timeout: o.timeout, progress: cmd.ErrOrStderr()}
			if err := im.run(cmd.Context(), in, batch); err != nil {
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				return apiExit(connHint(c.Addr(), tlsHint(c.Addr(), err)))
			}
			return o.print(cmd.OutOrStdout(), map[string]int{"accepted": im.accepted, "duplicate": im.duplicate}, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "imported %d task(s): %d added, %d already there\n", im.accepted+im.duplicate, im.accepted, im.duplicate)
			})
		},
	}
	cmd.Flags().StringVarP(&input, "input", "i", "-", "the file written by tasks export, - for stdin")
	cmd.Flags().IntVar(&batch, "batch", 500, "tasks per import call")
	return cmd
}

type importer struct {
	c                   *api.Client
	timeout             time.Duration
	progress            io.Writer
	accepted, duplicate int
}

// run reads the file a line at a time and sends batches of at most batch
// tasks and importBatchBytes.
func (im *importer) run(ctx context.Context, in io.Reader, batch int) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxExportLine)
	var tasks []api.TaskExport
	var lines []int
	size, line := 0, 0
	flush := func() error {
		if len(tasks) == 0 {
			return nil
		}
		err := im.send(ctx, tasks, lines)
		tasks, lines, size = tasks[:0], lines[:0], 0
		return err
	}
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var t api.TaskExport
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return &exitError{code: 2, msg: fmt.Sprintf("--input line %d: not an exported task: %v", line, err)}
		}
		if len(tasks) > 0 && (len(tasks) >= batch || size+len(raw) > importBatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		tasks, lines, size = append(tasks, t), append(lines, line), size+len(raw)
	}
	if err := sc.Err(); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("--input after line %d: %v", line, err)}
	}
	return flush()
}

var batchField = regexp.MustCompile(`^tasks\[(\d+)\]\.?(.*)$`)

// send imports one batch, retrying what the cluster could not take now.
func (im *importer) send(ctx context.Context, tasks []api.TaskExport, lines []int) error {
	for try := 0; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, im.timeout)
		res, err := im.c.ImportTasks(cctx, tasks)
		cancel()
		var ae *api.Error
		if err == nil {
			for _, r := range res.Results {
				if r.Outcome == api.OutcomeDuplicate {
					im.duplicate++
				} else {
					im.accepted++
				}
			}
			fmt.Fprintf(im.progress, "imported %d so far (%d added, %d already there)\n", im.accepted+im.duplicate, im.accepted, im.duplicate)
			return nil
		}
		if errors.As(err, &ae) && ae.Field != "" {
			// Name the file's line of the refused task.
			if m := batchField.FindStringSubmatch(ae.Field); m != nil {
				if i, _ := strconv.Atoi(m[1]); i < len(lines) {
					return &exitError{code: 3, msg: fmt.Sprintf("--input line %d (%s): %s; fix it and run the import again (the tasks before it are in)", lines[i], orDash(m[2]), ae.Message)}
				}
			}
		}
		retry := errors.As(err, &ae) && (ae.Code == api.CodeUnavailable || ae.Code == api.CodeOverloaded)
		if !retry || try+1 >= importRetries {
			return err
		}
		wait := time.Second
		if ae.RetryAfter > 0 {
			wait = time.Duration(ae.RetryAfter) * time.Second
		}
		fmt.Fprintf(im.progress, "the cluster could not take a batch (%s); retrying in %v\n", ae.Message, wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
