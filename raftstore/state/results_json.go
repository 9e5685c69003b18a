package state

import (
	"encoding/json"
	"strconv"
	"time"
)

// The submit's result is one outcome per task (up to 1000 per entry), and
// every replica encodes it (the dedup row keeps it): encoding/json's
// reflection was 4 % of a replica's apply of binary submits. submitOutcomes
// writes the same bytes by hand (TestSubmitOutcomesJSONMatchesMarshal).

// submitOutcomes is a submit's result value.
type submitOutcomes []SubmitOutcome

// jsonAppender is a result value that writes its own JSON (applyInto).
type jsonAppender interface {
	appendJSON(b []byte) []byte
}

// typedValue is a result value as its proposer asks for it
// (ApplyResult.Typed): a submit's outcomes as []SubmitOutcome, anything
// else as it is.
func typedValue(v any) any {
	if o, ok := v.(submitOutcomes); ok {
		return []SubmitOutcome(o)
	}
	return v
}

func (o submitOutcomes) appendJSON(b []byte) []byte {
	if o == nil {
		return append(b, "null"...)
	}
	n := 2
	for i := range o {
		n += 48 + len(o[i].TaskID) + len(o[i].Outcome) + len(o[i].Reason)
	}
	b = append(make([]byte, 0, len(b)+n), b...)
	b = append(b, '[')
	for i := range o {
		x := &o[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"task_id":`...)
		b = appendJSONString(b, x.TaskID)
		b = append(b, `,"shard":`...)
		b = strconv.AppendInt(b, int64(x.Shard), 10)
		b = append(b, `,"outcome":`...)
		b = appendJSONString(b, x.Outcome)
		if x.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, x.Reason)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendJSONString appends s as encoding/json writes it: printable ASCII
// other than ", \, <, > and & as it is, anything else through json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			m, _ := json.Marshal(s) // a string always encodes
			return append(b, m...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// configEntryJSON is a config write's result value (the entry written),
// encoded by hand: encoding/json's reflection over the ConfigEntry was a
// seventh of a replica's apply of a set_config (BenchmarkFSMApplyEntry).
// writeConfig returns it only for entries whose bytes it writes exactly as
// json.Marshal would (configEntryPlain); any other entry goes through
// json.Marshal as before (TestConfigEntryJSONMatchesMarshal).
type configEntryJSON struct{ e *ConfigEntry }

// configEntryPlain reports whether appendJSON writes e as json.Marshal
// does: its value already as json.Marshal writes a raw message (compact,
// HTML-escaped) and its time one that MarshalJSON accepts.
func configEntryPlain(e *ConfigEntry) bool {
	if len(e.Value) == 0 || !canonicalJSON(e.Value) {
		return false
	}
	// time.MarshalJSON's own limits: a four-digit year, an offset under 24h.
	y := e.UpdatedAt.Year()
	_, off := e.UpdatedAt.Zone()
	return y >= 0 && y <= 9999 && off > -24*3600 && off < 24*3600
}

func (c configEntryJSON) appendJSON(b []byte) []byte {
	e := c.e
	n := 120 + len(e.Key) + len(e.Namespace) + len(e.Destination) + len(e.Value) + len(e.Author)
	b = append(make([]byte, 0, len(b)+n), b...)
	b = append(b, `{"key":`...)
	b = appendJSONString(b, e.Key)
	if e.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, e.Namespace)
	}
	if e.Destination != "" {
		b = append(b, `,"destination":`...)
		b = appendJSONString(b, e.Destination)
	}
	b = append(b, `,"value":`...)
	b = append(b, e.Value...)
	b = append(b, `,"index":`...)
	b = strconv.AppendUint(b, e.Index, 10)
	b = append(b, `,"updated_at":`...)
	b = append(b, '"') // as MarshalJSON, within its limits (configEntryPlain)
	b = e.UpdatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if e.Author != "" {
		b = append(b, `,"author":`...)
		b = appendJSONString(b, e.Author)
	}
	return append(b, '}')
}
