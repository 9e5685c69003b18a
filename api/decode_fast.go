package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"

	gojson "github.com/goccy/go-json"
)

// The task submit bodies are the API's only hot decode: a batch of 500
// tasks is about 175 KB, and encoding/json's reflection decoded it at about
// 2.3 µs a task, 2 % of the CPU a durably delivered task costs three
// in-process nodes (docs/architecture.md, "Issue 17 §3"). The submit routes
// decode with github.com/goccy/go-json first, about three times faster, as
// transport.DecodeRequest does for stored requests. Only a clean success is
// taken from it: the whole body consumed but for white space, unknown fields
// refused. On any error the value is zeroed and the body decoded again by
// decodeStrictStd, so what is refused, and the error naming why, are
// encoding/json's. FuzzDecodeSubmit holds a fast decode to encoding/json's
// value on every body the API accepts.

// readJSONFast is readJSON for the task submit bodies (TaskSubmit,
// TaskBatchSubmit): decodeStrict instead of encoding/json alone.
func (s *Server) readJSONFast(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := s.readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	if err := decodeStrict(raw, v); err != nil {
		return err
	}
	return checkJSONText(raw)
}

// readSubmitBatch is readJSONFast for a batch submit, with the batch's
// slice sized before the decode: grown by doubling, it was half the bytes
// the decode allocated (BenchmarkDecodeSubmitBatch: 442 KB a batch of 500
// against 225 KB). The size is a hint counted from the body's task keys
// (a key inside a string value only oversizes it), at most the batch
// limit; a body without tasks leaves an empty slice, refused as before.
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

// decodeStrict decodes raw into v (a pointer) as decodeStrictStd does:
// goccy's decode when it succeeds cleanly, else encoding/json's answer.
func decodeStrict(raw []byte, v any) error {
	dec := gojson.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err == nil && onlySpace(raw[dec.InputOffset():]) {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero() // nothing goccy set may survive into the second decode
	return decodeStrictStd(raw, v)
}

// decodeStrictStd decodes raw into v with encoding/json, refusing unknown
// fields and anything after the value, errors as jsonError words them.
func decodeStrictStd(raw []byte, v any) error {
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

// onlySpace reports whether b is JSON white space alone.
func onlySpace(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}
