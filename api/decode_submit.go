package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// readSubmitBatch is readJSON for a batch submit, with the batch's slice
// sized before the decode, which encoding/json fills in place: grown by
// doubling, it was 28 % of the bytes the decode allocated
// (BenchmarkDecodeSubmitBatch: 633 KB a batch of 500 unsized, 456 KB
// sized; the time within the run's noise). The size is a hint counted from
// the body's task keys (a key inside a string value only oversizes it), at
// most the batch limit; a body without tasks leaves an empty slice,
// refused as before.
//
// The body stays with encoding/json, as every API body does: it is
// untrusted input and its errors name fields. goccy/go-json decodes it
// about three times faster (fifteenth and thirty-fifth sessions,
// docs/architecture.md "Issue 17 §3"), but a parser built on unsafe
// pointer arithmetic is not put on the ingress for 1.5 % of a task's CPU;
// it serves only JSON this system wrote or encoding/json accepted
// (internal/fastjson).
func (s *Server) readSubmitBatch(w http.ResponseWriter, r *http.Request) (TaskBatchSubmit, error) {
	var in TaskBatchSubmit
	raw, err := s.readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return in, err
	}
	in.Tasks = make([]TaskSubmit, 0, min(bytes.Count(raw, []byte(`"namespace_id"`)), MaxTaskBatchSubmit))
	if err := decodeStrict(raw, &in); err != nil {
		return in, err
	}
	return in, checkJSONText(raw)
}

// decodeStrict decodes raw into v with encoding/json, refusing unknown
// fields and anything after the value, errors as jsonError words them.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadField("", "request body has data after the JSON value")
	}
	return nil
}
