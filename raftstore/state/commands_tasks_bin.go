package state

import (
	"encoding/binary"
)

// The binary twins of the hot task commands (LogVersionTasksBin).
// submit_tasks and complete_tasks were about half of a replica's apply
// time, most of it encoding/json reading the payload; these carry the same
// commands in the encoding of bincodec.go and apply through the same
// validate and apply code, so an entry of either type leaves the same state
// (TestBinaryAndJSONTaskEntriesAgree). The JSON types stay: the log holds
// them, and a proposer sends them while the cluster is below
// LogVersionTasksBin or when a command holds a value the binary form does
// not carry as JSON would (errNotBinary).
const (
	// MsgSubmitTasksBin is MsgSubmitTasks in the binary encoding.
	MsgSubmitTasksBin MessageType = 20
	// MsgCompleteTasksBin is MsgCompleteTasks in the binary encoding.
	MsgCompleteTasksBin MessageType = 21
)

// Field names of the binary payloads, as the JSON twins name them.
var (
	newTaskStrNames = []string{"id", "namespace_id", "workflow_id", "task_group", "destination", "request_id", "destination_key"}
	resultStrNames  = []string{"task_id", "message", "operation_id"}
)

// Minimum bytes of one list item (every field at its shortest), which bounds
// a count before anything is allocated for it.
const (
	minNewTaskBytes = 7 + 3 + 1 + 1 // strings, ints, deadline, request
	minResultBytes  = 3 + 1 + 3 + 1 + 1 + 1 + 1
)

// Result statuses on the wire.
var (
	statusCodes = map[string]byte{TaskPending: 1, TaskSucceeded: 2, TaskFailed: 3, TaskDLQ: 4}
	statusNames = [...]string{1: TaskPending, 2: TaskSucceeded, 3: TaskFailed, 4: TaskDLQ}
)

// EncodeSubmitTasksBin returns the MsgSubmitTasksBin command for c:
//
//	at, author, max_shard_backlog, count, then per task: id, namespace_id,
//	workflow_id, task_group, destination, request_id, destination_key,
//	shard, max_destination_backlog, max_pending_tasks, deadline, request.
func EncodeSubmitTasksBin(c *SubmitTasksCommand) ([]byte, error) {
	// The buffer is sized once: 48 bytes a task cover its length prefixes,
	// ints and deadline (a smaller guess than the strings made it grow by
	// copying, at the size of a whole batch).
	size := 64
	for i := range c.Tasks {
		t := &c.Tasks[i]
		size += 48 + len(t.ID) + len(t.NamespaceID) + len(t.WorkflowID) + len(t.TaskGroup) + len(t.Destination) +
			len(t.RequestID) + len(t.DestinationKey) + len(t.Request)
	}
	b := append(make([]byte, 0, size), byte(MsgSubmitTasksBin))
	b, err := appendMeta(b, c.CommandMeta)
	if err != nil {
		return nil, err
	}
	b = appendInt(b, c.MaxShardBacklog)
	b = binary.AppendUvarint(b, uint64(len(c.Tasks)))
	for i := range c.Tasks {
		t := &c.Tasks[i]
		for _, s := range [...]string{t.ID, t.NamespaceID, t.WorkflowID, t.TaskGroup, t.Destination, t.RequestID, t.DestinationKey} {
			if err := checkBinStr(s); err != nil {
				return nil, err
			}
			b = appendStr(b, s)
		}
		b = appendInt(b, t.Shard)
		b = appendInt(b, t.MaxDestinationBacklog)
		b = appendInt(b, t.MaxPendingTasks)
		if b, err = appendTime(b, t.Deadline); err != nil {
			return nil, err
		}
		if b, err = appendRaw(b, t.Request); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func decodeSubmitTasksBin(p []byte) (SubmitTasksCommand, *Error) {
	r := binReader{b: p}
	var c SubmitTasksCommand
	c.CommandMeta = r.meta()
	c.MaxShardBacklog = r.int("max_shard_backlog")
	if n := r.count("tasks", minNewTaskBytes); n > 0 {
		c.Tasks = make([]NewTask, n)
	}
	r.list = "tasks"
	for i := range c.Tasks {
		r.item = i
		t := &c.Tasks[i]
		r.strs(newTaskStrNames, []*string{&t.ID, &t.NamespaceID, &t.WorkflowID, &t.TaskGroup, &t.Destination, &t.RequestID, &t.DestinationKey})
		t.Shard = r.int("shard")
		t.MaxDestinationBacklog = r.int("max_destination_backlog")
		t.MaxPendingTasks = r.int("max_pending_tasks")
		t.Deadline = r.time("deadline")
		t.Request = r.raw("request")
	}
	r.list = ""
	return c, r.done()
}

// EncodeCompleteTasksBin returns the MsgCompleteTasksBin command for c:
//
//	at, author, shard, epoch, node, count, then per result: task_id,
//	message, operation_id, status (1 pending, 2 succeeded, 3 failed,
//	4 dlq), attempts, blocked, unexpected, next_attempt_at, http_status,
//	output, started.
func EncodeCompleteTasksBin(c *CompleteTasksCommand) ([]byte, error) {
	size := 64 + len(c.Node)
	for i := range c.Results {
		res := &c.Results[i]
		size += 48 + len(res.TaskID) + len(res.Message) + len(res.OperationID) + len(res.Output)
	}
	b := append(make([]byte, 0, size), byte(MsgCompleteTasksBin))
	b, err := appendMeta(b, c.CommandMeta)
	if err != nil {
		return nil, err
	}
	b = appendInt(b, c.Shard)
	b = binary.AppendUvarint(b, c.Epoch)
	if err := checkBinStr(c.Node); err != nil {
		return nil, err
	}
	b = appendStr(b, c.Node)
	b = binary.AppendUvarint(b, uint64(len(c.Results)))
	for i := range c.Results {
		res := &c.Results[i]
		for _, s := range [...]string{res.TaskID, res.Message, res.OperationID} {
			if err := checkBinStr(s); err != nil {
				return nil, err
			}
			b = appendStr(b, s)
		}
		code, ok := statusCodes[res.Status]
		if !ok {
			return nil, errNotBinary // JSON carries it, and validate names it
		}
		b = append(b, code)
		b = appendInt(b, res.Attempts)
		b = appendInt(b, res.Blocked)
		b = appendInt(b, res.Unexpected)
		if b, err = appendTime(b, res.NextAttemptAt); err != nil {
			return nil, err
		}
		b = appendInt(b, res.HTTPStatus)
		if b, err = appendRaw(b, res.Output); err != nil {
			return nil, err
		}
		started := byte(0)
		if res.Started {
			started = 1
		}
		b = append(b, started)
	}
	return b, nil
}

func decodeCompleteTasksBin(p []byte) (CompleteTasksCommand, *Error) {
	r := binReader{b: p}
	var c CompleteTasksCommand
	c.CommandMeta = r.meta()
	c.Shard = r.int("shard")
	c.Epoch = r.uvarint("epoch")
	r.strs([]string{"node"}, []*string{&c.Node})
	if n := r.count("results", minResultBytes); n > 0 {
		c.Results = make([]TaskResult, n)
	}
	r.list = "results"
	for i := range c.Results {
		r.item = i
		res := &c.Results[i]
		r.strs(resultStrNames, []*string{&res.TaskID, &res.Message, &res.OperationID})
		if code := r.byteVal("status"); code >= 1 && int(code) < len(statusNames) {
			res.Status = statusNames[code]
		} else {
			r.fail("status", "unknown status code %d", code)
		}
		res.Attempts = r.int("attempts")
		res.Blocked = r.int("blocked")
		res.Unexpected = r.int("unexpected")
		res.NextAttemptAt = r.time("next_attempt_at")
		res.HTTPStatus = r.int("http_status")
		res.Output = r.raw("output")
		res.Started = r.flag("started")
	}
	r.list = ""
	return c, r.done()
}

func appendMeta(b []byte, m CommandMeta) ([]byte, error) {
	b, err := appendTime(b, m.At)
	if err != nil {
		return nil, err
	}
	if err := checkBinStr(m.Author); err != nil {
		return nil, err
	}
	return appendStr(b, m.Author), nil
}

func (r *binReader) meta() CommandMeta {
	var m CommandMeta
	m.At = r.time("at")
	r.strs([]string{"author"}, []*string{&m.Author})
	return m
}

func applySubmitTasksBin(w *writer, payload []byte) (any, *Error) {
	c, err := decodeSubmitTasksBin(payload)
	if err != nil {
		return nil, err
	}
	return submitTasks(w, &c)
}

func applyCompleteTasksBin(w *writer, payload []byte) (any, *Error) {
	c, err := decodeCompleteTasksBin(payload)
	if err != nil {
		return nil, err
	}
	return completeTasks(w, &c)
}
