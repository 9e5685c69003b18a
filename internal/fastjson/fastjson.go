// Package fastjson decodes JSON that fusebox's own code wrote, on hot
// paths, with github.com/goccy/go-json (about three times faster than
// encoding/json's reflection) and encoding/json's answer: only a successful
// goccy decode is taken; on any error the value is zeroed and decoded
// again by encoding/json, so what is refused, and the error saying why,
// are encoding/json's. Each type decoded through it has a fuzz target
// holding a goccy decode to encoding/json's value (FuzzUnmarshal here,
// transport's FuzzDecodeRequest). Untrusted API bodies, whose errors name
// fields, have their own strict decode (api/decode_fast.go).
package fastjson

import (
	"encoding/json"
	"reflect"

	gojson "github.com/goccy/go-json"
)

// Unmarshal decodes b into v, a non-nil pointer, as json.Unmarshal does.
func Unmarshal(b []byte, v any) error {
	if err := gojson.Unmarshal(b, v); err == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero() // nothing goccy set may survive into the second decode
	return json.Unmarshal(b, v)
}

// Valid reports whether b is one JSON value, as json.Valid does (goccy's
// scanner, about five times faster on a stored request: BenchmarkValid).
// FuzzValid holds the two to the same answer on every input.
func Valid(b []byte) bool { return gojson.Valid(b) }
