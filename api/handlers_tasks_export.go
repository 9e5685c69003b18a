package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"fusebox/raftstore/state"
	"fusebox/tasks"
	"fusebox/transport"
)

// Moving pending tasks between clusters (issue 18: the embedded Raft store
// to PostgreSQL, back, or between two clusters of either store).
// GET /v1/tasks:export pages the pending tasks with their requests as
// stored; POST /v1/tasks:import inserts them, each with its own id,
// attempts, next attempt and deadline, idempotently (a task id or a
// (namespace, request id) already stored is a duplicate). Both are admin
// only: the export carries secret header values and URL queries, which the
// importing cluster needs to deliver the tasks.

func (h *taskHandlers) export(w http.ResponseWriter, r *http.Request) error {
	q, err := listQuery(r)
	if err != nil {
		return err
	}
	q.Status = state.TaskPending
	if _, remote := h.svc.(TaskListerCtx); !remote {
		// The Raft store reads this replica: catch up with the leader first,
		// so a page holds every task committed before the request.
		if err := h.svc.Sync(r.Context()); err != nil {
			return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: 1,
				Message: "this node cannot catch up with the cluster to export; retry: " + err.Error()}
		}
	}
	ts, next, err := h.listPage(r.Context(), q)
	if err != nil {
		return err
	}
	out := TaskExportPage{Tasks: make([]TaskExport, 0, len(ts)), Next: next}
	for _, t := range ts {
		if t.Status != state.TaskPending {
			continue
		}
		out.Tasks = append(out.Tasks, TaskExport{
			Version: TaskExportVersion, ID: t.ID, NamespaceID: t.NamespaceID, WorkflowID: t.WorkflowID,
			TaskGroup: t.TaskGroup, Destination: t.Destination, RequestID: t.RequestID, Request: t.Request,
			Attempts: t.Attempts, NextAttemptAt: t.NextAttemptAt, CreatedAt: t.CreatedAt, Deadline: t.Deadline, Shard: t.Shard,
		})
	}
	w.Header().Set("Cache-Control", "no-store") // the page carries secrets
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *taskHandlers) importTasks(w http.ResponseWriter, r *http.Request) error {
	var in TaskImport
	if err := h.s.readJSON(w, r, &in); err != nil {
		return err
	}
	if err := checkBatchLen(len(in.Tasks)); err != nil {
		return err
	}
	if err := h.guard.admitNode(); err != nil {
		return err
	}
	at := h.s.meta(r).At
	tasks := make([]ImportedTask, len(in.Tasks))
	for i := range in.Tasks {
		t, err := h.importedTask(r.Context(), &in.Tasks[i], at, fmt.Sprintf("tasks[%d].", i))
		if err != nil {
			return err
		}
		tasks[i] = t
	}
	out, err := h.svc.ImportTasks(r.Context(), tasks)
	if err != nil {
		return err
	}
	if len(out) != len(tasks) {
		return fmt.Errorf("import: %d outcomes for %d tasks", len(out), len(tasks))
	}
	res := TaskImportResult{Results: make([]TaskBatchItem, len(out))}
	for i, o := range out {
		res.Results[i] = TaskBatchItem{TaskID: o.TaskID, Shard: o.Shard, Outcome: o.Outcome}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// importedTask validates one exported task as a submit is validated (the
// fields, the task group, the request, the endpoint or the callback
// allowlist, the size) and keeps its id, deadline, attempts, next attempt
// and creation time. Errors are 400s naming the field (tasks[i].…).
func (h *taskHandlers) importedTask(ctx context.Context, e *TaskExport, at time.Time, prefix string) (ImportedTask, error) {
	bad := func(field, format string, args ...any) error { return BadField(prefix+field, format, args...) }
	switch {
	case e.Version != TaskExportVersion:
		return ImportedTask{}, bad("v", "unknown export format version %d (this build reads %d)", e.Version, TaskExportVersion)
	case !tasks.ValidID(e.ID):
		return ImportedTask{}, bad("id", "want a task id (32 lowercase hex digits), got %q", tasks.TruncateRunes(e.ID, 64))
	case e.Attempts < 0 || e.Attempts > state.MaxImportAttempts:
		return ImportedTask{}, bad("attempts", "must be in [0, %d], got %d", state.MaxImportAttempts, e.Attempts)
	case e.CreatedAt.IsZero():
		return ImportedTask{}, bad("created_at", "required")
	case len(e.Request) == 0:
		return ImportedTask{}, bad("request", "required")
	}
	var req transport.Request
	dec := json.NewDecoder(bytes.NewReader(e.Request))
	dec.DisallowUnknownFields() // a field of a newer build is refused, never dropped
	if err := dec.Decode(&req); err != nil {
		return ImportedTask{}, bad("request", "not a stored request: %v", err)
	}
	in := TaskSubmit{
		NamespaceID: e.NamespaceID, WorkflowID: e.WorkflowID, TaskGroup: e.TaskGroup, Destination: e.Destination,
		RequestID: e.RequestID,
		Request:   tasks.RequestOf(req),
	}
	nt, err := h.newTask(ctx, &in, at, prefix)
	if err != nil {
		return ImportedTask{}, err
	}
	// The task keeps its id (the Nexus-Request-Id a destination saw, and
	// what makes a second import a duplicate) and its deadline; the backlog
	// limits do not apply: the tasks were accepted once already.
	nt.ID, nt.Deadline = e.ID, e.Deadline
	nt.MaxDestinationBacklog, nt.MaxPendingTasks = 0, 0
	next := e.NextAttemptAt
	if next.IsZero() {
		next = at
	}
	return ImportedTask{NewTask: nt, Attempts: e.Attempts, NextAttemptAt: next, CreatedAt: e.CreatedAt}, nil
}
