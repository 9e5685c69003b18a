package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"fusebox/raftstore/state"
	"fusebox/shardmap"
	"fusebox/tasks"
)

// TaskReader is what the task API reads of the task table, locally and
// stale-OK (raftstore/state.State, through raftstore.Store.Reader; or the
// postgres task store).
type TaskReader interface {
	Task(id string) (state.Task, bool)
	ListTasksPage(q state.TaskQuery) ([]state.Task, string)
	ShardCount() int
	Endpoint(name string) (state.Endpoint, bool)
	// DestinationBacklog and PendingTasks are the local replica's counts
	// the limits apply to (the FSM enforces them exactly).
	DestinationBacklog(namespace, destination string) int
	PendingTasks() int
}

// TaskService is the replicated task table as the task API uses it: its
// reads, the writes of *raftstore.Store, and the node's dynamic limits
// (node.NewTaskAPI).
type TaskService interface {
	TaskReader
	SubmitTasks(ctx context.Context, c state.SubmitTasksCommand) ([]state.SubmitOutcome, uint64, error)
	// RememberedSubmit is the answer the local replica remembers for a
	// submit proposed with this (scoped) request id, after the retries of
	// its refused tasks (raftstore's submit_retry.go), and whether it
	// remembers one: a retry gets that answer, but a task it still
	// refuses is decided afresh.
	RememberedSubmit(requestID string) ([]state.SubmitOutcome, bool)
	RedriveTasks(ctx context.Context, c state.RedriveTasksCommand) (state.RedriveOutcome, error)
	// ImportTasks inserts tasks moved from another cluster with their ids,
	// attempts, next attempt and deadline, idempotently: an error means
	// none is known committed.
	ImportTasks(ctx context.Context, ts []ImportedTask) ([]state.SubmitOutcome, error)
	WaitForApplied(ctx context.Context, index uint64) error
	// Sync is a read barrier: it returns once the local replica has applied
	// everything committed before the call.
	Sync(ctx context.Context) error
	// SubmitLimits are the backlog limits of a submit for namespace and a
	// breaker destination (transport.BreakerDestination): pending tasks per
	// (namespace, destination) and in the whole table; 0: none.
	SubmitLimits(namespace, destination string) (perDestination, pending int)
	// DataDirSpace is this node's data-dir free space and the floor below
	// which it refuses submits (0: no floor).
	DataDirSpace() (free, floor uint64)
	// RedactHeaderNames are the header names redacted on reads for a
	// namespace and breaker destination, beyond transport.SecretHeader's
	// built-in ones (dynconfig's fusebox.redaction.headerNames).
	RedactHeaderNames(namespace, destination string) []string
	// CheckDestination reports why rawURL may not be called for namespace
	// (a *transport.DestinationError: a member's address after DNS
	// resolution, or, with allowlist, not in the namespace's allowlist), or
	// nil.
	CheckDestination(ctx context.Context, namespace, rawURL string, allowlist bool) error
	// CheckEndpointURL is the check of an endpoint URL on PUT
	// (transport.Policy.CheckEndpoint).
	CheckEndpointURL(ctx context.Context, rawURL string) error
}

// TaskReaderCtx and TaskListerCtx are what a TaskService over a remote
// database (node's postgres task store) adds: reads that take the
// request's context and can fail (a 503, not a 404 or an empty page). The
// handlers use them when the service has them.
type TaskReaderCtx interface {
	TaskCtx(ctx context.Context, id string) (state.Task, bool, error)
}

// TaskListerCtx: see TaskReaderCtx.
type TaskListerCtx interface {
	ListTasksPageCtx(ctx context.Context, q state.TaskQuery) ([]state.Task, string, error)
}

// Task API limits.
const (
	// MaxTaskListLimit bounds one page of a listing.
	MaxTaskListLimit = 1000
	// MaxTaskBatchSubmit bounds the tasks of one batch submit.
	MaxTaskBatchSubmit = 500
	// overloadRetryAfter is the Retry-After of a 429, in seconds.
	overloadRetryAfter = 1
	// maxRedriveRounds bounds how many redrive commands "all" proposes.
	maxRedriveRounds = 100
)

// taskRoutes registers the task and DLQ routes over svc. The server calls
// it when Deps.Tasks is set.
func (s *Server) taskRoutes(svc TaskService) {
	h := &taskHandlers{s: s, svc: svc, guard: newSubmitGuard(svc, s.cfg.Registerer, s.log)}
	s.handle("POST /v1/tasks", needSubmit, h.submit)
	s.handle("POST /v1/tasks:batch", needSubmit, h.submitBatch)
	s.handle("GET /v1/tasks/{id}", needTaskRead, h.get)
	s.handle("GET /v1/tasks", needRead, h.list)
	s.handle("GET /v1/dlq", needRead, h.dlq)
	if c, ok := svc.(TaskCounter); ok {
		s.handle("GET /v1/tasks/_counts", needRead, h.counts(c)) // handlers_task_counts.go
	}
	s.handle("POST /v1/dlq/redrive", needAdmin, h.redrive)
	// Moving pending tasks between clusters (handlers_tasks_export.go):
	// admin only, since an export carries the requests as stored.
	s.handle("GET /v1/tasks:export", needAdmin, h.export)
	s.handle("POST /v1/tasks:import", needAdmin, h.importTasks)
}

type taskHandlers struct {
	s     *Server
	svc   TaskService
	guard *submitGuard
}

func (h *taskHandlers) submit(w http.ResponseWriter, r *http.Request) error {
	var in TaskSubmit
	if err := h.s.readJSON(w, r, &in); err != nil {
		return err
	}
	meta := h.s.metaFor(r, &in)
	nt, err := h.newTask(r.Context(), &in, meta.At, "")
	if err != nil {
		return err
	}
	if err := h.guard.admit(&nt, h.answered(meta.RequestID)); err != nil {
		return err
	}
	out, idx, err := h.svc.SubmitTasks(r.Context(), state.SubmitTasksCommand{
		CommandMeta: meta, Tasks: []state.NewTask{nt},
	})
	if err != nil {
		return err
	}
	if len(out) != 1 {
		return fmt.Errorf("submit: %d outcomes for one task", len(out))
	}
	if out[0].Outcome == state.SubmitOverloaded {
		return h.guard.refusedErr(&nt, out[0].Reason)
	}
	h.waitApplied(r.Context(), idx)
	writeJSON(w, http.StatusAccepted, TaskAccepted{TaskID: out[0].TaskID, Shard: out[0].Shard, Duplicate: out[0].Outcome == state.SubmitDuplicate})
	return nil
}

func (h *taskHandlers) submitBatch(w http.ResponseWriter, r *http.Request) error {
	var in TaskBatchSubmit
	if err := h.s.readJSONLimit(w, r, &in, h.s.cfg.MaxBodyBytes, func(body []byte) {
		in.Tasks = make([]TaskSubmit, 0, batchSizeHint(body))
	}); err != nil {
		return err
	}
	if err := checkBatchLen(len(in.Tasks)); err != nil {
		return err
	}
	if err := h.guard.admitNode(); err != nil {
		return err
	}
	meta := h.s.metaFor(r, &in)
	built := make([]state.NewTask, len(in.Tasks))
	for i := range in.Tasks {
		// Ids sort by time: offset each by its position to keep batch order.
		nt, err := tasks.New(r.Context(), h.svc, &in.Tasks[i], meta.At.Add(time.Duration(i)))
		if err != nil { // the item's prefix is built only for an error
			return taskError(err, fmt.Sprintf("tasks[%d].", i))
		}
		built[i] = nt
	}
	out, idx, err := h.svc.SubmitTasks(r.Context(), state.SubmitTasksCommand{
		CommandMeta: meta, Tasks: built,
	})
	if err != nil {
		return err
	}
	if len(out) != len(built) {
		return fmt.Errorf("submit: %d outcomes for %d tasks", len(out), len(built))
	}
	res := TaskBatchAccepted{Results: make([]TaskBatchItem, len(out))}
	queued := 0
	for i, o := range out {
		res.Results[i] = TaskBatchItem{TaskID: o.TaskID, Shard: o.Shard, Outcome: o.Outcome}
		switch o.Outcome {
		case state.SubmitOverloaded:
			res.Results[i].TaskID = ""
			res.Results[i].Reason = o.Reason
			res.RetryAfter = overloadRetryAfter
			h.guard.count(o.Reason)
		default:
			queued++
		}
	}
	if queued == 0 {
		for i, o := range out {
			if o.Outcome == state.SubmitOverloaded {
				return h.guard.overloadError(&built[i], o.Reason)
			}
		}
	}
	h.waitApplied(r.Context(), idx)
	writeJSONFast(w, http.StatusAccepted, res)
	return nil
}

// answered reports whether the local replica remembers an answer to a
// single submit with request id that a retry must get as it is: not one
// that refuses the task, which the retry decides afresh, local backlog
// check included.
func (h *taskHandlers) answered(requestID string) bool {
	if requestID == "" {
		return false
	}
	out, ok := h.svc.RememberedSubmit(requestID)
	return ok && (len(out) != 1 || out[0].Outcome != state.SubmitOverloaded)
}

// newTask validates one submit and builds the task to propose
// (tasks.New). Errors are 400s naming the API body's field (with prefix
// for a batch item), a 413 for a request over the payload limit, or a 503.
func (h *taskHandlers) newTask(ctx context.Context, in *TaskSubmit, at time.Time, prefix string) (state.NewTask, error) {
	nt, err := tasks.New(ctx, h.svc, in, at)
	return nt, taskError(err, prefix)
}

// taskError is the API's answer to a task the domain refused: its code's
// status, the field with prefix (a batch item's tasks[i].), Retry-After 1
// when retryable. Other errors pass through to the server's mapping.
func taskError(err error, prefix string) error {
	var te *tasks.Error
	if !errors.As(err, &te) {
		return err
	}
	e := &Error{Status: statusOf(te.Code), Code: te.Code, Message: te.Message}
	if te.Field != "" {
		e.Field = prefix + te.Field
	}
	if te.Retryable() {
		e.RetryAfter = 1
	}
	return e
}

func (h *taskHandlers) waitApplied(ctx context.Context, index uint64) {
	ctx, cancel := context.WithTimeout(ctx, readYourWritesWait)
	defer cancel()
	if err := h.svc.WaitForApplied(ctx, index); err != nil {
		h.s.log.Warn("task write committed but not yet applied locally", "index", index, "err", err)
	}
}

func (h *taskHandlers) get(w http.ResponseWriter, r *http.Request) error {
	var t state.Task
	var ok bool
	if rc, isCtx := h.svc.(TaskReaderCtx); isCtx {
		var err error
		if t, ok, err = rc.TaskCtx(r.Context(), r.PathValue("id")); err != nil {
			return err
		}
	} else {
		t, ok = h.svc.Task(r.PathValue("id"))
	}
	if !ok {
		return Errorf(http.StatusNotFound, CodeNotFound, "no task %q (terminal tasks are collected after the retention period)", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, toTask(t, true, h.svc))
	return nil
}

func (h *taskHandlers) list(w http.ResponseWriter, r *http.Request) error {
	q, err := listQuery(r)
	if err != nil {
		return err
	}
	if v := r.URL.Query().Get("shard"); v != "" {
		n, err := intParam(r, "shard", 0, 0, shardmap.MaxShards-1)
		if err != nil {
			return err
		}
		q.Shard = &n
	}
	switch st := r.URL.Query().Get("status"); st {
	case "", state.TaskPending, state.TaskSucceeded, state.TaskFailed, state.TaskDLQ, state.TaskStatusBlocked:
		q.Status = st
	default:
		return BadField("status", "want pending, blocked, succeeded, failed or dlq, got %q", st)
	}
	return h.writeList(w, r, q)
}

func (h *taskHandlers) dlq(w http.ResponseWriter, r *http.Request) error {
	q, err := listQuery(r)
	if err != nil {
		return err
	}
	q.Status = state.TaskDLQ
	return h.writeList(w, r, q)
}

func listQuery(r *http.Request) (state.TaskQuery, error) {
	limit, err := intParam(r, "limit", 100, 1, MaxTaskListLimit)
	if err != nil {
		return state.TaskQuery{}, err
	}
	after := r.URL.Query().Get("after")
	if len(after) > 128 {
		return state.TaskQuery{}, BadField("after", "longer than 128 bytes")
	}
	return state.TaskQuery{Limit: limit, After: after}, nil
}

func (h *taskHandlers) writeList(w http.ResponseWriter, r *http.Request, q state.TaskQuery) error {
	ts, next, err := h.listPage(r.Context(), q)
	if err != nil {
		return err
	}
	out := TaskList{Tasks: make([]Task, len(ts)), Next: next}
	for i, t := range ts {
		out.Tasks[i] = toTask(t, false, h.svc)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listPage reads one page of a listing, through the context-taking read
// when the service has one.
func (h *taskHandlers) listPage(ctx context.Context, q state.TaskQuery) ([]state.Task, string, error) {
	if lc, ok := h.svc.(TaskListerCtx); ok {
		return lc.ListTasksPageCtx(ctx, q)
	}
	ts, next := h.svc.ListTasksPage(q)
	return ts, next, nil
}

func (h *taskHandlers) redrive(w http.ResponseWriter, r *http.Request) error {
	var in Redrive
	if err := h.s.readJSON(w, r, &in); err != nil {
		return err
	}
	switch {
	case in.All && len(in.IDs) > 0:
		return BadField("ids", "give ids or all, not both")
	case !in.All && len(in.IDs) == 0:
		return BadField("ids", "give the ids to redrive, or \"all\": true")
	case len(in.IDs) > state.MaxRedriveBatch:
		return BadField("ids", "%d ids exceeds the limit of %d per call", len(in.IDs), state.MaxRedriveBatch)
	}
	res := RedriveResult{Redriven: []string{}}
	for round := 0; ; round++ {
		meta := h.s.meta(r)
		if round > 0 {
			meta.RequestID = "" // each round is its own command
		}
		out, err := h.svc.RedriveTasks(r.Context(), state.RedriveTasksCommand{CommandMeta: meta, IDs: in.IDs, All: in.All})
		if err != nil {
			if round > 0 {
				break // report what was done; the caller can repeat
			}
			return err
		}
		res.Redriven = append(res.Redriven, out.Redriven...)
		res.More = out.More
		if !out.More || round+1 >= maxRedriveRounds {
			break
		}
	}
	res.Count = len(res.Redriven)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// batchSizeHint is the tasks a batch submit's body holds, for sizing the
// slice encoding/json fills in place: grown by doubling, it was 28 % of the
// bytes a batch's decode allocated (BenchmarkDecodeSubmitBatch: 633 KB a
// batch of 500 unsized, 456 KB sized; the time within the run's noise).
// It counts the body's task keys (one inside a string value only oversizes
// the slice), at most MaxTaskBatchSubmit; a body without tasks leaves an
// empty slice, refused as before.
func batchSizeHint(body []byte) int {
	return min(bytes.Count(body, []byte(`"namespace_id"`)), MaxTaskBatchSubmit)
}

// checkBatchLen refuses an empty batch and one over MaxTaskBatchSubmit,
// naming tasks (a batch submit, an import).
func checkBatchLen(n int) error {
	switch {
	case n == 0:
		return BadField("tasks", "at least one task is required")
	case n > MaxTaskBatchSubmit:
		return BadField("tasks", "%d tasks exceeds the batch limit of %d", n, MaxTaskBatchSubmit)
	}
	return nil
}
