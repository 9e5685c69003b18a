package tasks

import (
	"encoding/json"
	"errors"
	"testing"

	"fusebox/errcode"
	"fusebox/transport"
)

// FuzzNew feeds New submits decoded from untrusted JSON, as the API does:
// whatever the bytes, New answers a task or an *Error with a known code
// (invalid_argument naming a field), never panics, and a task it builds
// carries a request that decodes and is in bounds.
func FuzzNew(f *testing.F) {
	for _, s := range []Submit{callbackSubmit(), startSubmit()} {
		b, _ := json.Marshal(s)
		f.Add(b)
	}
	f.Add([]byte(`{"namespace_id":"n","workflow_id":"w","task_group":"callbacks.Invocation","destination":"http://127.0.0.1:9/cb","request":{"body":"eA==","content_type":"text/plain; charset=\u0000"}}`))
	f.Add([]byte(`{"namespace_id":"n","workflow_id":"w","task_group":"nexusoperations.Cancelation","destination":"orders","request":{"service":"s","operation":"o","operation_id":"x"},"schedule_to_close_timeout":"1.5"}`))
	f.Add([]byte(`{"namespace_id":"n","workflow_id":"w","task_group":"callbacks.Invocation","destination":"http://[::1]:9/cb","request":{"completion":{"state":"failed","failure_message":"x"},"header":{"X-Api-Key":"k"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var in Submit
		if json.Unmarshal(b, &in) != nil {
			return
		}
		e := newEnv()
		nt, err := New(t.Context(), timeoutEnv{e}, &in, at)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("err %v (%T): want a *tasks.Error", err, err)
			}
			if !errcode.Known(te.Code) || (te.Code == errcode.InvalidArgument && te.Field == "") {
				t.Fatalf("error %v: want a known code, and a field for invalid_argument", te)
			}
			return
		}
		if !ValidID(nt.ID) || nt.Shard < 0 || nt.Shard >= e.shards || len(nt.Request) == 0 {
			t.Fatalf("task %+v", nt)
		}
		var req transport.Request
		if err := json.Unmarshal(nt.Request, &req); err != nil {
			t.Fatalf("stored request does not decode: %v", err)
		}
		if req.TaskGroup != in.TaskGroup {
			t.Fatalf("stored task group %q, submitted %q", req.TaskGroup, in.TaskGroup)
		}
	})
}
