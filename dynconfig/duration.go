package dynconfig

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Durations are read the way Temporal's dynamic config reads them
// (common/dynamicconfig/collection.go convertDuration and
// common/primitives/timestamp ParseDurationDefaultSeconds), so a value copied
// from a Temporal file means the same thing here:
//
//   - a JSON number is seconds: 10 → 10s, 1.5 → 1.5s;
//   - a string without a unit is seconds: "10" → 10s;
//   - a string is a Go duration with one more unit, "d" = exactly 24h:
//     "1d12h" → 36h, "1.5d" → 36h.
//
// The canonical form is always time.Duration.String() ("36h0m0s"), so the
// value stored in Raft is unambiguous whatever spelling was proposed.
var (
	reUnitless = regexp.MustCompile(`^(\d+(\.\d*)?|(\.\d+))$`)
	reDays     = regexp.MustCompile(`(\d+(\.\d*)?|(\.\d+))d`)
)

// maxDurationText bounds the duration strings parsed (longer ones cannot be
// meaningful and would only cost regexp work).
const maxDurationText = 64

// ParseDuration parses a duration string as Temporal's dynamic config does:
// a Go duration, plus the unit "d" (24h), and a unitless number is seconds.
func ParseDuration(s string) (time.Duration, error) {
	if len(s) > maxDurationText {
		return 0, &strconv.NumError{Func: "ParseDuration", Num: truncate(s, maxEcho), Err: strconv.ErrRange}
	}
	if reUnitless.MatchString(s) {
		s += "s"
	}
	var convErr error
	s = reDays.ReplaceAllStringFunc(s, func(v string) string {
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "d"), 64)
		if err != nil || f*24 > math.MaxInt64/float64(time.Hour) {
			convErr = strconv.ErrRange
			return v
		}
		return strconv.FormatFloat(24*f, 'f', -1, 64) + "h"
	})
	if convErr != nil {
		return 0, &strconv.NumError{Func: "ParseDuration", Num: truncate(s, maxEcho), Err: convErr}
	}
	return time.ParseDuration(s)
}

// decodeDuration reads a duration value: a JSON number of seconds or a
// string for ParseDuration.
func decodeDuration(raw []byte) (time.Duration, *ValidationError) {
	switch {
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, bad("want a duration (seconds, or a string such as \"10s\" or \"1d\"), got %s", echo(raw))
		}
		secs := f * float64(time.Second)
		if secs > math.MaxInt64 || secs < math.MinInt64 {
			return 0, bad("duration out of range: %s seconds", echo(raw))
		}
		return time.Duration(secs), nil
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, bad("want a duration string such as \"10s\", got %s", echo(raw))
		}
		d, err := ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return 0, bad("invalid duration %s (want seconds, or a Go duration with the extra unit d, such as \"90s\" or \"1d\")",
				strconv.Quote(truncate(s, maxEcho)))
		}
		return d, nil
	}
	return 0, bad("want a duration (seconds, or a string such as \"10s\" or \"1d\"), got %s", echo(raw))
}
