package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"fusebox/raftstore/state"
)

// Every id and name the API takes — task, request and workflow ids,
// namespaces, endpoint names, config keys, destinations — arrives as a path
// value, a query parameter, a header or a JSON string. Go would turn invalid
// UTF-8 in any of them (and a JSON \u escape of a lone UTF-16 surrogate)
// into U+FFFD without a word, so two different ids could become one stored
// id. These checks refuse such input with a 400 naming the field instead;
// handle runs checkRequestText on every API route and readJSON runs
// checkJSONText on every body.

// textHeaders are the request headers whose values are stored.
var textHeaders = []string{"X-Request-Id", "X-Fusebox-Author"}

var wildcardRe = regexp.MustCompile(`\{([^}.]+)(?:\.\.\.)?\}`)

// checkRequestText checks the route's path values (by the wildcard names
// of the pattern that matched), the query parameters and textHeaders.
func checkRequestText(r *http.Request) *Error {
	for _, m := range wildcardRe.FindAllStringSubmatch(r.Pattern, -1) {
		if v := r.PathValue(m[1]); !utf8.ValidString(v) {
			return BadField(m[1], "path value %s=%s is not valid UTF-8", m[1], strconv.QuoteToASCII(v))
		}
	}
	for k, vs := range r.URL.Query() {
		if !utf8.ValidString(k) {
			return BadField(k, "query parameter name %s is not valid UTF-8", strconv.QuoteToASCII(k))
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return BadField(k, "query parameter %s=%s is not valid UTF-8", k, strconv.QuoteToASCII(v))
			}
		}
	}
	for _, h := range textHeaders {
		for _, v := range r.Header.Values(h) {
			if !utf8.ValidString(v) {
				return BadField(h, "header %s: %s is not valid UTF-8", h, strconv.QuoteToASCII(v))
			}
		}
	}
	// Hashed into the write's dedup id (request_id.go), the header would
	// otherwise be refused only by its length in the log, naming request_id.
	if v := r.Header.Get("X-Request-Id"); len(v) > state.MaxRequestIDLen {
		return BadField("X-Request-Id", "header X-Request-Id: %d bytes, more than %d", len(v), state.MaxRequestIDLen)
	}
	return nil
}

// checkJSONText refuses a JSON document (already decoded successfully) in
// which a string — a value or a field name — holds invalid UTF-8 or a lone
// surrogate escape, naming the field by its path (tasks[2].namespace_id).
// Almost every body is valid: one pass over the bytes decides that; only a
// suspect body is walked token by token to find the field.
func checkJSONText(body []byte) error {
	if utf8.Valid(body) && !mayHaveSurrogate(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		obj     bool
		path    string
		key     string
		idx     int
		wantKey bool
	}
	var stack []frame
	valuePath := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.obj {
			if f.path == "" {
				return f.key
			}
			return f.path + "." + f.key
		}
		return fmt.Sprintf("%s[%d]", f.path, f.idx)
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if f := &stack[len(stack)-1]; f.obj {
			f.wantKey = true
		} else {
			f.idx++
		}
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return BadField("", "invalid JSON body: %v", err)
		}
		raw := body[start:dec.InputOffset()]
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, frame{obj: v == '{', path: valuePath(), wantKey: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			f := (*frame)(nil)
			if len(stack) > 0 {
				f = &stack[len(stack)-1]
			}
			if f != nil && f.obj && f.wantKey {
				if !validJSONText(raw) {
					return BadField(f.path, "a field name (%s) in %q is not valid UTF-8", strconv.QuoteToASCII(v), f.path)
				}
				f.key, f.wantKey = v, false
				continue
			}
			if !validJSONText(raw) {
				p := valuePath()
				return BadField(p, "field %q is not valid UTF-8 (invalid bytes or a lone \\u surrogate escape)", p)
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// mayHaveSurrogate reports whether b holds a \u escape in the surrogate
// range (\uD800–\uDFFF); a false positive only costs the slow path.
func mayHaveSurrogate(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`\u`))
		if i < 0 || i+3 > len(b) {
			return false
		}
		if c := b[i+2] | 0x20; c == 'd' && i+3 < len(b) {
			switch b[i+3] | 0x20 {
			case '8', '9', 'a', 'b', 'c', 'd', 'e', 'f':
				return true
			}
		}
		b = b[i+2:]
	}
}

// validJSONText checks the raw bytes of one JSON string token (with any
// whitespace and separator before it): valid UTF-8, and every surrogate
// escape is a high surrogate followed by a low one.
func validJSONText(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // an escaped character, possibly a backslash
			continue
		}
		r1, ok := hex4(raw, i+2)
		if !ok {
			return false
		}
		i += 5
		if !utf16.IsSurrogate(r1) {
			continue
		}
		if r1 >= 0xDC00 || i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
			return false
		}
		r2, ok := hex4(raw, i+3)
		if !ok || utf16.DecodeRune(r1, r2) == utf8.RuneError {
			return false
		}
		i += 6
	}
	return true
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 16)
	return rune(n), err == nil
}
