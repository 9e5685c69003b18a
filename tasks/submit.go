// Package tasks is the task domain between the API and the task stores:
// what a producer submits (Submit, the wire request), what makes one valid,
// and the task New builds from it for a store to insert — its id, its
// shard, its deadline and the backlog limits it counts against. It speaks
// no HTTP: errors are *Error with a code from package errcode and the
// submit's JSON field. DESIGN.md says why it is a package of its own.
package tasks

import (
	"encoding/json"

	"fusebox/transport"
)

// Submit is one task as a producer asks for it: the body of POST /v1/tasks
// and one item of a batch (api.TaskSubmit), and what an imported task is
// checked as. External contract: add fields, never rename them.
type Submit struct {
	NamespaceID string `json:"namespace_id"`
	WorkflowID  string `json:"workflow_id"`
	// TaskGroup is nexusoperations.Invocation, nexusoperations.Cancelation
	// or callbacks.Invocation.
	TaskGroup string `json:"task_group"`
	// Destination is the Nexus endpoint name (Nexus task groups; it must be
	// registered) or the callback URL (callbacks.Invocation).
	Destination string `json:"destination"`
	// RequestID makes the submit idempotent within the namespace: a second
	// submit with the same one answers with the first task's id and shard.
	RequestID string  `json:"request_id,omitempty"`
	Request   Request `json:"request"`
	// ScheduleToCloseTimeout bounds how long the task may take to be
	// delivered ("30s", "2h", "1d"; unitless: seconds). Empty: the default
	// of fusebox.tasks.defaultScheduleToCloseTimeout. The deadline is fixed
	// at submit; undelivered by then, the task fails "deadline exceeded".
	ScheduleToCloseTimeout string `json:"schedule_to_close_timeout,omitempty"`
}

// Request is the call a task makes (api.TaskRequest). Which fields apply
// depends on the task group: service, operation and input (start);
// service, operation and operation_id (cancel); completion, or body and
// content_type (callback). It is transport.Request as a producer writes
// it: no URL (the destination gives it) and the Nexus request id under its
// own name.
type Request struct {
	Service   string          `json:"service,omitempty"`
	Operation string          `json:"operation,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// OperationID is the token of the operation to cancel.
	OperationID string `json:"operation_id,omitempty"`
	// NexusRequestID is sent as Nexus-Request-Id; it defaults to the task id,
	// which stays the same across redeliveries.
	NexusRequestID string            `json:"nexus_request_id,omitempty"`
	CallbackURL    string            `json:"callback_url,omitempty"`
	CallbackHeader map[string]string `json:"callback_header,omitempty"`
	// Completion (a Nexus completion) or Body (raw, base64 in JSON) with
	// ContentType: callbacks only.
	Completion  *transport.Completion `json:"completion,omitempty"`
	Body        []byte                `json:"body,omitempty"`
	ContentType string                `json:"content_type,omitempty"`
	Header      map[string]string     `json:"header,omitempty"`
}

// outbound is the call r describes for taskGroup, without its URL.
func (r *Request) outbound(taskGroup string) transport.Request {
	return transport.Request{
		TaskGroup: taskGroup, Service: r.Service, Operation: r.Operation, Input: r.Input,
		OperationID: r.OperationID, RequestID: r.NexusRequestID,
		CallbackURL: r.CallbackURL, CallbackHeader: r.CallbackHeader,
		Completion: r.Completion, Body: r.Body, ContentType: r.ContentType, Header: r.Header,
	}
}

// RequestOf is the Request a stored transport.Request was built from (an
// imported task is checked as a submit of it).
func RequestOf(req transport.Request) Request {
	return Request{
		Service: req.Service, Operation: req.Operation, Input: req.Input, OperationID: req.OperationID,
		NexusRequestID: req.RequestID, CallbackURL: req.CallbackURL, CallbackHeader: req.CallbackHeader,
		Completion: req.Completion, Body: req.Body, ContentType: req.ContentType, Header: req.Header,
	}
}

// requestField maps a transport.Request field (ValidationError.Field) onto
// the Submit's JSON field.
func requestField(f string) string {
	switch f {
	case "url":
		return "destination"
	case "task_group":
		return "task_group"
	case "request_id":
		return "request.nexus_request_id"
	}
	return "request." + f
}

// ValidID reports whether id has raftstore.NewTaskID's form: 32 lowercase
// hex digits.
func ValidID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
