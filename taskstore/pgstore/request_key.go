package pgstore

import (
	"strconv"
	"strings"

	"fusebox/raftstore/state"
)

// A submit's X-Request-Id on this store (docs/api.md, "Authors").
//
// The raft store remembers each write's dedup id (the caller's X-Request-Id
// scoped by the API with its token, route and body) in its log and answers
// a retry with the first write's answer. This store has no log: the one
// thing that keeps a task from being stored twice is the unique
// (namespace_id, request_id) index. So a task submitted without a
// request_id of its own, under a dedup id, is stored with a request_id
// derived from that id and its position in the submit: a retry of the
// submit meets the stored row and is answered with the first task's id
// (a duplicate), as on the raft store. Without it a client's retry after a
// lost answer stored every task again.
//
// The derived id starts with a control character, which a request_id given
// by a client cannot hold (tasks.checkFields refuses them), so the two
// never meet; reads show it as no request id (scanTask). A task refused by
// a limit is not stored, so a retry of it is decided afresh — unlike the
// raft store, which remembers the refusal for its dedup window.

// derivedKeyPrefix starts every request_id derived from a dedup id.
const derivedKeyPrefix = "\x1f"

// KeyedByRequest returns tasks, each without a request_id of its own given
// one derived from the submit's dedup id requestID and its position; tasks
// itself when requestID is empty or every task has its own.
func KeyedByRequest(tasks []state.NewTask, requestID string) []state.NewTask {
	if requestID == "" {
		return tasks
	}
	var out []state.NewTask
	for i := range tasks {
		if tasks[i].RequestID != "" {
			continue
		}
		if out == nil {
			out = append([]state.NewTask(nil), tasks...)
		}
		out[i].RequestID = derivedKeyPrefix + requestID + "#" + strconv.Itoa(i)
	}
	if out == nil {
		return tasks
	}
	return out
}

// clientRequestID is the request_id a read shows for stored id: "" for one
// derived from a dedup id.
func clientRequestID(stored string) string {
	if strings.HasPrefix(stored, derivedKeyPrefix) {
		return ""
	}
	return stored
}
