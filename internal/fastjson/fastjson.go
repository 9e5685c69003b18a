// Package fastjson reads and writes JSON on fusebox's hot paths with
// github.com/goccy/go-json (three to five times faster than encoding/json's
// reflection) and encoding/json's answers, for JSON this system wrote or
// bytes encoding/json has already accepted: a stored request, a cluster
// member's answer to a forwarded write, a proposer's check of a request the
// API decoded. Untrusted bytes — an API body, a destination's answer —
// stay with encoding/json: goccy is built on unsafe pointer arithmetic.
//
// Unmarshal takes only a successful goccy decode; on any error the value
// is zeroed and decoded again by encoding/json, so what is refused, and
// the error saying why, are encoding/json's. Marshal takes goccy's bytes,
// held equal to encoding/json's; on an error it encodes again with
// encoding/json. Valid is goccy's scanner. A panic inside goccy is taken
// as its error: encoding/json answers. Each has a fuzz target holding it to
// encoding/json for the types that go through it (FuzzUnmarshal,
// FuzzMarshal, FuzzValid here; transport's FuzzDecodeRequest and
// FuzzEncodeRequest).
package fastjson

import (
	"encoding/json"
	"reflect"

	gojson "github.com/goccy/go-json"
)

// Unmarshal decodes b into v, a non-nil pointer, as json.Unmarshal does.
func Unmarshal(b []byte, v any) error {
	if goccy(func() error { return gojson.Unmarshal(b, v) }) {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero() // nothing goccy set may survive into the second decode
	}
	return json.Unmarshal(b, v) // a nil or non-pointer v: its InvalidUnmarshalError
}

// Valid reports whether b is one JSON value, as json.Valid does (goccy's
// scanner, about five times faster on a stored request: BenchmarkValid).
// FuzzValid holds the two to the same answer on every input.
func Valid(b []byte) bool {
	var ok bool
	if goccy(func() error {
		ok = gojson.Valid(b)
		return nil
	}) {
		return ok
	}
	return json.Valid(b)
}

// Marshal encodes v as json.Marshal does, byte for byte: goccy's bytes, or
// encoding/json's answer (and error) for a value goccy cannot encode.
// FuzzMarshal holds the bytes equal for every type encoded through it.
func Marshal(v any) ([]byte, error) {
	var b []byte
	if goccy(func() (err error) {
		b, err = gojson.Marshal(v)
		return err
	}) {
		return b, nil
	}
	return json.Marshal(v)
}

// goccy runs fn and reports whether it returned nil without panicking.
func goccy(fn func() error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return fn() == nil
}
