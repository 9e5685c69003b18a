package transport

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// DecodeRequest decodes a stored request: the JSON a submit wrote with
// encoding/json (tasks.New). The queue decodes one per attempt, and
// encoding/json's reflection made that 3.6 % of a durably delivered task's
// CPU (docs/architecture.md, "Issue 17 §3"); github.com/goccy/go-json
// decodes the same bytes into the same value about four times faster. Only
// a successful decode is taken from it: on any error the bytes are decoded
// again by encoding/json, so what is refused, and the error saying why, are
// encoding/json's. FuzzDecodeRequest holds a goccy decode to encoding/json's
// value on every input it accepts. The API's request bodies, which are
// untrusted and whose errors name fields, stay with encoding/json.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	if err := gojson.Unmarshal(b, &r); err == nil {
		return r, nil
	}
	r = Request{}
	err := json.Unmarshal(b, &r)
	return r, err
}
