package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// SubmitTask enqueues one task (POST /v1/tasks). Overload comes back as an
// *Error with code resource_exhausted and RetryAfter set.
func (c *Client) SubmitTask(ctx context.Context, t TaskSubmit) (TaskAccepted, error) {
	var out TaskAccepted
	return out, c.Do(ctx, http.MethodPost, "/v1/tasks", nil, t, &out)
}

// SubmitTasks enqueues a batch in one Raft entry (POST /v1/tasks:batch).
// Items whose shard was over its limit come back with OutcomeOverloaded.
func (c *Client) SubmitTasks(ctx context.Context, ts []TaskSubmit) (TaskBatchAccepted, error) {
	var out TaskBatchAccepted
	return out, c.Do(ctx, http.MethodPost, "/v1/tasks:batch", nil, TaskBatchSubmit{Tasks: ts}, &out)
}

// Task returns one task with its status, attempts and last answer.
func (c *Client) Task(ctx context.Context, id string) (Task, error) {
	var out Task
	return out, c.Do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil, nil, &out)
}

// Tasks lists tasks in id order (one page; TaskList.Next is the next After).
func (c *Client) Tasks(ctx context.Context, q TaskListQuery) (TaskList, error) {
	v := listValues(q.After, q.Limit)
	if q.Shard != nil {
		v.Set("shard", strconv.Itoa(*q.Shard))
	}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	var out TaskList
	return out, c.Do(ctx, http.MethodGet, "/v1/tasks", v, nil, &out)
}

// DLQ lists dead-lettered tasks (one page).
func (c *Client) DLQ(ctx context.Context, after string, limit int) (TaskList, error) {
	var out TaskList
	return out, c.Do(ctx, http.MethodGet, "/v1/dlq", listValues(after, limit), nil, &out)
}

// Redrive moves dead-lettered tasks back to pending: r.IDs, or r.All.
func (c *Client) Redrive(ctx context.Context, r Redrive) (RedriveResult, error) {
	var out RedriveResult
	return out, c.Do(ctx, http.MethodPost, "/v1/dlq/redrive", nil, r, &out)
}

func listValues(after string, limit int) url.Values {
	v := url.Values{}
	if after != "" {
		v.Set("after", after)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	return v
}

// ExportTasks reads one page of pending tasks with their requests as
// stored (GET /v1/tasks:export, admin). Keep paging while Next is set.
func (c *Client) ExportTasks(ctx context.Context, after string, limit int) (TaskExportPage, error) {
	var out TaskExportPage
	return out, c.Do(ctx, http.MethodGet, "/v1/tasks:export", listValues(after, limit), nil, &out)
}

// ImportTasks inserts exported tasks with their ids (POST /v1/tasks:import,
// admin); a task already stored comes back as a duplicate.
func (c *Client) ImportTasks(ctx context.Context, ts []TaskExport) (TaskImportResult, error) {
	var out TaskImportResult
	return out, c.Do(ctx, http.MethodPost, "/v1/tasks:import", nil, TaskImport{Tasks: ts}, &out)
}
