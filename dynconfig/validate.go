package dynconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Limits on untrusted input (values arrive over HTTP).
const (
	// MaxValueBytes bounds the size of one value.
	MaxValueBytes = 16 << 10
	// MaxValueDepth bounds the nesting of arrays and objects in one value.
	MaxValueDepth = 16
	// MaxNameBytes bounds a namespace or destination constraint.
	MaxNameBytes = 1024
	// maxKeyBytes bounds a key name; longer names are unknown by definition.
	maxKeyBytes = 256
	// maxEcho bounds how much untrusted text an error message repeats.
	maxEcho = 64
)

// Entry is one stored dynamic-config value: a key, the constraint it applies
// at (empty Namespace and Destination is the global value), and the JSON
// value.
type Entry struct {
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value"`
}

// Constraint is the level e applies at.
func (e Entry) Constraint() Constraint { return constraintOf(e.Namespace, e.Destination) }

// ErrUnknownKey is matched (errors.Is) by the error Validate and Canonical
// return for a key that is not registered.
var ErrUnknownKey = errors.New("unknown dynamic config key")

// ValidationError says why a value (or its constraint) is rejected. Field
// names the offending field of an object value ("Timeout"), "namespace" or
// "destination" for a bad constraint, and is empty for a scalar value.
type ValidationError struct {
	Key    string
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Key + ": " + e.Reason
	}
	return e.Key + ": " + e.Field + ": " + e.Reason
}

// Validate reports whether e may be stored. It is pure and deterministic, so
// raftstore may call it both before proposing and inside its FSM. The error
// is ErrUnknownKey (wrapped) or a *ValidationError.
func Validate(e Entry) error {
	_, _, err := check(e)
	return err
}

// Canonical validates e and returns its normalized value: defaults filled in,
// zero-value meanings applied, compact, fields in a fixed order. Canonical of
// a canonical value returns it unchanged, so the stored value is always the
// one Canonical produced.
func Canonical(e Entry) (json.RawMessage, error) {
	d, v, err := check(e)
	if err != nil {
		return nil, err
	}
	return d.encode(v), nil
}

// check validates e and returns its key's definition and decoded value.
func check(e Entry) (*definition, any, error) {
	i, ok := byName[e.Key]
	if !ok {
		return nil, nil, fmt.Errorf("%w %s", ErrUnknownKey, strconv.Quote(truncate(e.Key, maxKeyBytes)))
	}
	d := registry[i]
	if err := checkName("namespace", e.Namespace); err != nil {
		err.Key = d.name
		return nil, nil, err
	}
	if err := checkName("destination", e.Destination); err != nil {
		err.Key = d.name
		return nil, nil, err
	}
	if c := e.Constraint(); !d.scope.Accepts(c) {
		field := "namespace"
		if e.Namespace == "" || d.scope&PerNamespace != 0 {
			field = "destination"
		}
		return nil, nil, &ValidationError{Key: d.name, Field: field,
			Reason: "not accepted: this key is " + d.scope.String()}
	}
	if err := checkShape(e.Value); err != "" {
		return nil, nil, &ValidationError{Key: d.name, Reason: err}
	}
	v, ferr := d.decode(bytes.TrimSpace(e.Value))
	if ferr != nil {
		ferr.Key = d.name
		ferr.Reason = truncate(ferr.Reason, 4*maxEcho)
		return nil, nil, ferr
	}
	return d, v, nil
}

// checkName validates a namespace or destination constraint: empty (none),
// or printable UTF-8 without surrounding space, at most MaxNameBytes.
func checkName(field, s string) *ValidationError {
	switch {
	case s == "":
		return nil
	case len(s) > MaxNameBytes:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("too long: %d bytes, limit %d", len(s), MaxNameBytes)}
	case !utf8.ValidString(s):
		return &ValidationError{Field: field, Reason: "not valid UTF-8"}
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return &ValidationError{Field: field, Reason: fmt.Sprintf("contains the non-printable character %U", r)}
		}
	}
	if r, _ := utf8.DecodeRuneInString(s); unicode.IsSpace(r) {
		return &ValidationError{Field: field, Reason: "must not start with a space"}
	}
	if r, _ := utf8.DecodeLastRuneInString(s); unicode.IsSpace(r) {
		return &ValidationError{Field: field, Reason: "must not end with a space"}
	}
	return nil
}

// checkShape bounds size and nesting and checks that raw is one JSON value.
// It returns a reason, or "" when raw is acceptable.
func checkShape(raw []byte) string {
	switch {
	case len(bytes.TrimSpace(raw)) == 0:
		return "value is required"
	case len(raw) > MaxValueBytes:
		return fmt.Sprintf("value too large: %d bytes, limit %d", len(raw), MaxValueBytes)
	case !json.Valid(raw):
		return "value is not valid JSON"
	}
	if depth(raw) > MaxValueDepth {
		return fmt.Sprintf("value nested too deeply: limit %d levels", MaxValueDepth)
	}
	return ""
}

// depth returns the maximum nesting of arrays and objects in valid JSON.
func depth(raw []byte) int {
	cur, maxDepth := 0, 0
	inString, escaped := false, false
	for _, b := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			cur++
			maxDepth = max(maxDepth, cur)
		case b == '}' || b == ']':
			cur--
		}
	}
	return maxDepth
}

// truncate shortens untrusted text before an error message repeats it.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Back off to a rune boundary so the message stays valid UTF-8.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// echo renders untrusted raw JSON for an error message.
func echo(raw []byte) string { return truncate(string(raw), maxEcho) }
