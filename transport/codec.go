package transport

import "fusebox/internal/fastjson"

// DecodeRequest decodes a stored request: the JSON a submit wrote
// (tasks.New, EncodeRequest). The queue decodes one per attempt, and
// encoding/json's reflection made that 3.6 % of a durably delivered task's
// CPU (docs/architecture.md, "Issue 17 §3"); internal/fastjson decodes the
// same bytes into the same value about four times faster, with
// encoding/json's answer on any input goccy refuses. FuzzDecodeRequest
// holds it to encoding/json's value on every input.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	err := fastjson.Unmarshal(b, &r)
	return r, err
}

// EncodeRequest encodes r as tasks.New stores it: encoding/json's bytes,
// written by internal/fastjson (goccy, about three times faster: 1 % of a
// durably delivered task's CPU on three in-process nodes), with
// encoding/json's error for a value goccy cannot encode. FuzzEncodeRequest
// holds the bytes to encoding/json's.
func EncodeRequest(r *Request) ([]byte, error) { return fastjson.Marshal(r) }
