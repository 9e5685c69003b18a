package api

import (
	"encoding/json"
	"time"

	"fusebox/tasks"
)

// Wire types of moving pending tasks between clusters (issue 18: from the
// embedded Raft store to PostgreSQL): GET /v1/tasks:export and
// POST /v1/tasks:import. External contract: add fields, never rename them.

// TaskExportVersion is TaskExport.Version: the record format.
const TaskExportVersion = 1

// TaskExport is one pending task as exported: one line of the JSON Lines
// file `fusebox admin tasks export` writes, and one item of an import.
//
// Request is the stored request (a transport.Request as JSON) AS STORED:
// header values, callback headers and URL queries are NOT redacted, since
// the importing cluster must send them. That is why the export route is
// admin-only and the file must be kept like a credential.
type TaskExport struct {
	Version     int    `json:"v"`
	ID          string `json:"id"`
	NamespaceID string `json:"namespace_id"`
	WorkflowID  string `json:"workflow_id"`
	TaskGroup   string `json:"task_group"`
	Destination string `json:"destination"`
	RequestID   string `json:"request_id,omitempty"`
	// Request is the stored outbound request, secrets included.
	Request       json.RawMessage `json:"request"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at,omitzero"`
	CreatedAt     time.Time       `json:"created_at"`
	// Deadline is the schedule-to-close deadline (absent: none); an import
	// keeps it as it is, it does not start again.
	Deadline time.Time `json:"deadline,omitzero"`
	// Shard is the task's shard on the exporting cluster (information only:
	// an import places the task by the importing cluster's shard count).
	Shard int `json:"shard"`
}

// TaskExportPage is GET /v1/tasks:export: pending tasks in id order. Next,
// when set, is the `after` of the next page; a page can be short (or
// empty) with Next set: keep paging until Next is empty.
type TaskExportPage struct {
	Tasks []TaskExport `json:"tasks"`
	Next  string       `json:"next,omitempty"`
}

// TaskImport is the body of POST /v1/tasks:import (up to
// MaxTaskBatchSubmit tasks).
type TaskImport struct {
	Tasks []TaskExport `json:"tasks"`
}

// TaskImportResult answers an import in request order; each item's
// Outcome is accepted (inserted with its id, attempts, next attempt and
// deadline) or duplicate (a task with that id, or with that (namespace,
// request id), is already stored: TaskID names it and nothing was added).
type TaskImportResult struct {
	Results []TaskBatchItem `json:"results"`
}

// ImportedTask is one validated task of an import as the store inserts
// it (tasks.Imported).
type ImportedTask = tasks.Imported
