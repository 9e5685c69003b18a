package dynconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// definition is one registered key. decode receives a value that passed
// checkShape (valid JSON, bounded, trimmed) and returns the typed, normalized
// value or a *ValidationError whose Key the caller fills in. encode writes
// the canonical JSON of a decoded value; decode(encode(v)) == v.
type definition struct {
	name   string
	typ    string
	desc   string
	scope  Scope
	def    any
	defRaw json.RawMessage
	decode func(raw []byte) (any, *ValidationError)
	encode func(v any) json.RawMessage
}

func newDefinition(name, typ, desc string, scope Scope, def any,
	decode func([]byte) (any, *ValidationError), encode func(any) json.RawMessage) *definition {
	d := &definition{name: name, typ: typ, desc: desc, scope: scope, def: def, decode: decode, encode: encode}
	d.defRaw = encode(def)
	// A default that does not survive its own validation is a programming
	// error in the registration table: fail at init, not at lookup.
	if v, err := decode(d.defRaw); err != nil || !equalValue(v, def) {
		panic(fmt.Sprintf("dynconfig: default of %s does not round-trip: %v", name, err))
	}
	return d
}

// equalValue compares decoded values (lists included).
func equalValue(a, b any) bool { return reflect.DeepEqual(a, b) }

func bad(reason string, args ...any) *ValidationError {
	return &ValidationError{Reason: fmt.Sprintf(reason, args...)}
}

func isNull(raw []byte) bool { return string(raw) == "null" }

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dynconfig: marshal %T: %v", v, err))
	}
	return b
}

// intKey registers an integer key with value in [lo, hi].
func intKey(name string, def, lo, hi int, scope Scope, desc string) *definition {
	decode := func(raw []byte) (any, *ValidationError) {
		n, err := decodeInt(raw, int64(lo), int64(hi))
		if err != nil {
			return nil, err
		}
		return int(n), nil
	}
	return newDefinition(name, "int", desc, scope, def, decode, mustMarshal)
}

func decodeInt(raw []byte, lo, hi int64) (int64, *ValidationError) {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, bad("want an integer, got %s", echo(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, bad("must be in [%d, %d], got %s", lo, hi, echo(raw))
		}
		return 0, bad("want an integer, got %s", echo(raw))
	}
	if n < lo || n > hi {
		return 0, bad("must be in [%d, %d], got %d", lo, hi, n)
	}
	return n, nil
}

// floatKey registers a number key with value in (0, hi].
func floatKey(name string, def, hi float64, scope Scope, desc string) *definition {
	decode := func(raw []byte) (any, *ValidationError) {
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return nil, bad("want a number, got %s", echo(raw))
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, bad("want a finite number, got %s", echo(raw))
		}
		if !(f > 0 && f <= hi) {
			return nil, bad("must be in (0, %s], got %v", strconv.FormatFloat(hi, 'f', -1, 64), f)
		}
		return f, nil
	}
	return newDefinition(name, "float", desc, scope, def, decode, mustMarshal)
}

// floatZeroKey registers a float key with value in [0, hi], where 0 has a
// meaning of its own (off).
func floatZeroKey(name string, def, hi float64, scope Scope, desc string) *definition {
	decode := func(raw []byte) (any, *ValidationError) {
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return nil, bad("want a number, got %s", echo(raw))
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, bad("want a finite number, got %s", echo(raw))
		}
		if !(f >= 0 && f <= hi) {
			return nil, bad("must be in [0, %s], got %v", strconv.FormatFloat(hi, 'f', -1, 64), f)
		}
		return f, nil
	}
	return newDefinition(name, "float", desc, scope, def, decode, mustMarshal)
}

// durationKey registers a duration key with value in (0, hi].
func durationKey(name string, def, hi time.Duration, scope Scope, desc string) *definition {
	return durationRangeKey(name, def, 0, hi, false, scope, desc)
}

// durationZeroKey registers a duration key with value in [0, hi], where 0
// has a meaning of its own (none, no limit).
func durationZeroKey(name string, def, hi time.Duration, scope Scope, desc string) *definition {
	return durationRangeKey(name, def, 0, hi, true, scope, desc)
}

func durationRangeKey(name string, def, lo, hi time.Duration, loIncluded bool, scope Scope, desc string) *definition {
	decode := func(raw []byte) (any, *ValidationError) {
		d, err := decodeDuration(raw)
		if err != nil {
			return nil, err
		}
		if loIncluded && (d < lo || d > hi) {
			return nil, bad("must be in [%s, %v], got %v", fmtLow(lo), hi, d)
		}
		if !loIncluded && (d <= lo || d > hi) {
			return nil, bad("must be in (%s, %v], got %v", fmtLow(lo), hi, d)
		}
		return d, nil
	}
	encode := func(v any) json.RawMessage { return mustMarshal(v.(time.Duration).String()) }
	return newDefinition(name, "duration", desc, scope, def, decode, encode)
}

// fmtLow prints a range's low end, 0 as "0".
func fmtLow(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// enumKey registers a string key whose value is one of allowed.
func enumKey(name, def string, allowed []string, scope Scope, desc string) *definition {
	list := strings.Join(allowed, ", ")
	decode := func(raw []byte) (any, *ValidationError) {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, bad("want a string (one of %s), got %s", list, echo(raw))
		}
		if !slices.Contains(allowed, s) {
			return nil, bad("must be one of %s, got %s", list, strconv.Quote(truncate(s, maxEcho)))
		}
		return s, nil
	}
	return newDefinition(name, "enum("+strings.Join(allowed, "|")+")", desc, scope, def, decode, mustMarshal)
}
