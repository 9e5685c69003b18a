package state

// Apply returns t updated by r, as a store applies a result: the one
// definition of what a result changes, used by this package's complete, the
// queue's in-memory store (queuetest) and, in SQL, matched by pgstore. It
// does not check r.TaskID. A start marker changes nothing here: the store,
// which knows the write's epoch, sets AttemptEpoch. Nor does it set what
// only a store knows: CompletedAt and Index.
func (r *TaskResult) Apply(t Task) Task {
	if r.Started {
		return t
	}
	t.AttemptEpoch = 0
	t.Status = r.Status
	t.Attempts = r.Attempts
	t.Blocked = r.Blocked
	t.Unexpected = r.Unexpected
	if r.Status == TaskPending {
		t.NextAttemptAt = r.NextAttemptAt
		if !t.Deadline.IsZero() && t.NextAttemptAt.After(t.Deadline) {
			t.NextAttemptAt = t.Deadline // due at its deadline, to fail then
		}
	}
	t.Message = r.Message
	t.HTTPStatus = r.HTTPStatus
	if r.OperationID != "" {
		t.OperationID = r.OperationID
	}
	if r.Output != nil {
		t.Output = r.Output
	}
	return t
}
