package state

import (
	"encoding/json"
	"strconv"
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
