package pgstore

import (
	"encoding/json"

	"fusebox/queue"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// toQueueTask converts a row as node.TaskStore does: a request that no
// longer decodes is handed over with a task group that cannot match, so
// the queue dead-letters it as poison with the reason.
func toQueueTask(t *state.Task) queue.Task {
	var req transport.Request
	if err := json.Unmarshal(t.Request, &req); err != nil {
		msg := err.Error()
		if len(msg) > 200 {
			msg = msg[:200]
		}
		req = transport.Request{TaskGroup: "undecodable request: " + msg}
	}
	return queue.Task{
		ID: t.ID, Shard: t.Shard, NamespaceID: t.NamespaceID, WorkflowID: t.WorkflowID, TaskGroup: t.TaskGroup,
		Destination: t.Destination, Request: req, Attempts: t.Attempts, Blocked: t.Blocked, Unexpected: t.Unexpected,
		NextAttemptAt: t.NextAttemptAt, CreatedAt: t.CreatedAt, Deadline: t.Deadline, Status: queue.Status(t.Status),
		Message: t.Message, HTTPStatus: t.HTTPStatus, OperationID: t.OperationID, Output: t.Output,
		AttemptEpoch: t.AttemptEpoch,
	}
}
