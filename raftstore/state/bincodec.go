package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// The primitives of the binary payloads (commands_tasks_bin.go). Integers are
// varints (zigzag for signed ones), strings and byte strings a uvarint length
// then the bytes, a time a presence byte then (Unix seconds, nanoseconds, UTC
// offset in minutes). Every value has exactly one encoding the decoder
// accepts: overlong varints, a string that is not UTF-8, a presence byte
// other than 0 or 1 and bytes after the last field are errors, so a payload
// decodes alike on every replica and a garbled one is refused, never
// guessed at.

// errNotBinary: a value the binary payload does not carry the way its JSON
// twin would (a string that is not UTF-8, a time JSON would refuse or
// round off). The proposer then sends the JSON type, so both encodings of a
// command always leave the same state.
var errNotBinary = errors.New("not representable in the binary encoding")

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendInt(b []byte, v int) []byte { return binary.AppendVarint(b, int64(v)) }

// checkBinStr reports whether s travels unchanged: JSON replaces bytes that
// are not UTF-8, so such a string goes as JSON.
func checkBinStr(s string) error {
	if !utf8.ValidString(s) {
		return errNotBinary
	}
	return nil
}

// appendTime appends t as JSON would carry it: nothing of the zero time
// (the JSON fields are omitzero, or refused when zero), else the instant to
// the nanosecond and the UTC offset. A time JSON refuses (a year outside
// 0–9999, an offset of 24 h or more) or rounds (an offset with seconds)
// is errNotBinary.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if t.IsZero() {
		return append(b, 0), nil
	}
	_, off := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		return b, errNotBinary
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	return binary.AppendVarint(b, int64(off/60)), nil
}

// appendRaw appends a JSON value as json.Marshal writes a json.RawMessage
// (compacted, HTML-escaped), so the state holds the same bytes as after the
// JSON type; empty stays empty (omitempty). The proposer has validated it
// (validate, before proposing); a value with nothing to compact or escape
// (what json.Marshal produced, as the API's requests are) goes as it is.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return append(b, 0), nil
	}
	if !canonicalJSON(raw) {
		m, err := json.Marshal(raw)
		if err != nil {
			return b, err
		}
		raw = m
	}
	b = binary.AppendUvarint(b, uint64(len(raw)))
	return append(b, raw...), nil
}

// canonicalJSON reports whether valid JSON v is already as json.Marshal
// writes it: no whitespace (compaction removes it outside strings; inside
// a string it stays, but telling the two apart needs a scanner), no <, >, &
// and no U+2028, U+2029 (escaped).
func canonicalJSON(v []byte) bool {
	for i, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&':
			return false
		case 0xE2:
			if i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8 {
				return false
			}
		}
	}
	return true
}

// binReader decodes a binary payload. The first error sticks (with the
// field it names); every read after it returns zero values.
type binReader struct {
	b   []byte
	off int
	err *Error
	// list and item name the list item being read ("tasks", 3), so an
	// error names "tasks[3].id"; list "" outside lists.
	list string
	item int
	// loc is the zone of the last non-UTC offset read (locOff), reused.
	loc    *time.Location
	locOff int
}

func (r *binReader) fail(field, format string, args ...any) {
	if r.err != nil {
		return
	}
	if r.list != "" {
		field = fmt.Sprintf("%s[%d].%s", r.list, r.item, field)
	}
	r.err = invalidArg(field, "malformed binary payload: "+format, args...)
}

func (r *binReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || (n > 1 && r.b[r.off+n-1] == 0) {
		r.fail(field, "bad varint")
		return 0
	}
	r.off += n
	return v
}

func (r *binReader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 || (n > 1 && r.b[r.off+n-1] == 0) {
		r.fail(field, "bad varint")
		return 0
	}
	r.off += n
	return v
}

func (r *binReader) int(field string) int { return int(r.varint(field)) }

// flag reads a presence or boolean byte: 0 or 1.
func (r *binReader) flag(field string) bool {
	if r.err != nil {
		return false
	}
	if r.off >= len(r.b) || r.b[r.off] > 1 {
		r.fail(field, "want a 0 or 1 byte")
		return false
	}
	r.off++
	return r.b[r.off-1] == 1
}

// byteVal reads one byte.
func (r *binReader) byteVal(field string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(field, "truncated")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// span reads a length-prefixed field and returns its bounds in r.b; text
// fields must be UTF-8. Lengths are bounded only by the payload: limits are
// the commands' validate, as for their JSON twins.
func (r *binReader) span(field string, text bool) (start, end int) {
	n := r.uvarint(field)
	if r.err != nil {
		return r.off, r.off
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(field, "length %d runs past the end", n)
		return r.off, r.off
	}
	start, end = r.off, r.off+int(n)
	if text && !utf8.Valid(r.b[start:end]) {
		r.fail(field, "not UTF-8")
		return r.off, r.off
	}
	r.off = end
	return start, end
}

// raw reads a byte string into a fresh slice (nil when empty).
func (r *binReader) raw(field string) json.RawMessage {
	start, end := r.span(field, false)
	if start == end {
		return nil
	}
	return append(json.RawMessage(nil), r.b[start:end]...)
}

// time reads a time written by appendTime.
func (r *binReader) time(field string) time.Time {
	if !r.flag(field) {
		return time.Time{}
	}
	sec, nsec, offMin := r.varint(field), r.uvarint(field), r.varint(field)
	if r.err != nil {
		return time.Time{}
	}
	if nsec >= 1e9 || offMin <= -24*60 || offMin >= 24*60 {
		r.fail(field, "time out of range")
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec))
	if offMin == 0 {
		t = t.UTC()
	} else {
		if r.loc == nil || r.locOff != int(offMin)*60 {
			r.loc, r.locOff = time.FixedZone("", int(offMin)*60), int(offMin)*60
		}
		t = t.In(r.loc)
	}
	if y := t.Year(); y < 0 || y > 9999 || t.IsZero() || t.Unix() != sec {
		r.fail(field, "time out of range")
		return time.Time{}
	}
	return t
}

// done fails unless every byte was read.
func (r *binReader) done() *Error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("command", "%d bytes after the last field", len(r.b)-r.off)
	}
	return r.err
}

// count reads a list length; each item takes at least minItem bytes, so a
// count the rest of the payload cannot hold is refused before anything is
// allocated for it.
func (r *binReader) count(field string, minItem int) int {
	n := r.uvarint(field)
	if n > uint64((len(r.b)-r.off)/minItem) {
		r.fail(field, "%d items cannot fit in the %d bytes left", n, len(r.b)-r.off)
		return 0
	}
	return int(n)
}

// strs reads len(dst) consecutive text fields (named by names, at most 8)
// into dst with one allocation: the strings share one copy of their bytes,
// which is the item's own (a row never keeps another task's bytes alive).
func (r *binReader) strs(names []string, dst []*string) {
	var bounds [8][2]int
	first := r.off
	for i, name := range names {
		bounds[i][0], bounds[i][1] = r.span(name, true)
	}
	if r.err != nil {
		return
	}
	all := string(r.b[first:r.off])
	for i := range names {
		if s, e := bounds[i][0]-first, bounds[i][1]-first; s < e {
			*dst[i] = all[s:e]
		} else {
			*dst[i] = ""
		}
	}
}
