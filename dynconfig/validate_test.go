package dynconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const defaultSettingsJSON = `{"MaxRequests":1,"Interval":"0s","Timeout":"1m0s","FailureThreshold":6,"Enabled":true}`

type validateCase struct {
	name  string
	e     Entry
	canon string // when valid: the canonical value
	field string // when invalid: the ValidationError field
	want  string // when invalid: substring of the error message
}

func validateCases() []validateCase {
	bs := KeyBreakerSettings
	deep := `{"Timeout":` + strings.Repeat("[", MaxValueDepth+1) + strings.Repeat("]", MaxValueDepth+1) + `}`
	big := `{"Timeout":"1s"` + strings.Repeat(" ", MaxValueBytes) + `}`
	return []validateCase{
		// history.outboundQueue.circuitBreakerSettings: valid.
		{name: "settings empty object keeps defaults", e: ent(bs, "", "", `{}`), canon: defaultSettingsJSON},
		{name: "settings partial", e: ent(bs, "ns", "dest", ` { "MaxRequests": 3, "Timeout": "30s" } `),
			canon: `{"MaxRequests":3,"Interval":"0s","Timeout":"30s","FailureThreshold":6,"Enabled":true}`},
		{name: "settings zero values take Temporal's meaning", e: ent(bs, "", "", `{"MaxRequests":0,"Timeout":"0s"}`),
			canon: defaultSettingsJSON},
		{name: "settings failure rate window", e: ent(bs, "ns", "", `{"FailureRate":0.5,"Interval":"10s","MinRequests":20,"BucketPeriod":"1s"}`),
			canon: `{"MaxRequests":1,"Interval":"10s","Timeout":"1m0s","FailureThreshold":6,"FailureRate":0.5,"MinRequests":20,"BucketPeriod":"1s","Enabled":true}`},
		{name: "settings failure rate 1", e: ent(bs, "", "d", `{"FailureRate":1,"Interval":"1m","MinRequests":1}`),
			canon: `{"MaxRequests":1,"Interval":"1m0s","Timeout":"1m0s","FailureThreshold":6,"FailureRate":1,"MinRequests":1,"Enabled":true}`},
		{name: "settings disabled", e: ent(bs, "", "", `{"Enabled":false,"FailureThreshold":1}`),
			canon: `{"MaxRequests":1,"Interval":"0s","Timeout":"1m0s","FailureThreshold":1,"Enabled":false}`},
		// history.outboundQueue.circuitBreakerSettings: invalid.
		{name: "settings negative timeout", e: ent(bs, "", "", `{"Timeout":"-1s"}`), field: "Timeout",
			want: "history.outboundQueue.circuitBreakerSettings: Timeout: must not be negative"},
		{name: "settings negative interval", e: ent(bs, "", "", `{"Interval":"-5s"}`), field: "Interval", want: "must not be negative"},
		{name: "settings negative bucket period", e: ent(bs, "", "", `{"Interval":"5s","BucketPeriod":"-1s"}`), field: "BucketPeriod", want: "must not be negative"},
		{name: "settings bucket without interval", e: ent(bs, "", "", `{"BucketPeriod":"1s"}`), field: "BucketPeriod", want: "needs Interval"},
		{name: "settings zero threshold", e: ent(bs, "", "", `{"FailureThreshold":0}`), field: "FailureThreshold", want: "at least 1"},
		{name: "settings rate above 1", e: ent(bs, "", "", `{"FailureRate":1.5,"Interval":"10s","MinRequests":5}`), field: "FailureRate", want: "(0, 1]"},
		{name: "settings negative rate", e: ent(bs, "", "", `{"FailureRate":-0.1,"Interval":"10s","MinRequests":5}`), field: "FailureRate", want: "(0, 1]"},
		{name: "settings rate without window", e: ent(bs, "", "", `{"FailureRate":0.5,"MinRequests":5}`), field: "FailureRate", want: "Interval"},
		{name: "settings rate without min requests", e: ent(bs, "", "", `{"FailureRate":0.5,"Interval":"10s"}`), field: "MinRequests", want: "at least 1"},
		{name: "settings unknown field", e: ent(bs, "", "", `{"Timeout":"1s","Bogus":1}`), field: "Bogus",
			want: "history.outboundQueue.circuitBreakerSettings: Bogus: unknown field"},
		{name: "settings field case-insensitive (Temporal)", e: ent(bs, "", "", `{"timeout":"1s","maxrequests":2}`),
			canon: `{"MaxRequests":2,"Interval":"0s","Timeout":"1s","FailureThreshold":6,"Enabled":true}`},
		{name: "settings two spellings of one field", e: ent(bs, "", "", `{"Timeout":"1s","TIMEOUT":"2s"}`), field: "Timeout", want: "set more than once"},
		{name: "settings duration in days", e: ent(bs, "", "", `{"Timeout":"1d","Interval":"0.5d"}`),
			canon: `{"MaxRequests":1,"Interval":"12h0m0s","Timeout":"24h0m0s","FailureThreshold":6,"Enabled":true}`},
		{name: "settings hint policy is its own key", e: ent(bs, "", "", `{"HintPolicy":"adopt"}`), field: "HintPolicy", want: "unknown field"},
		{name: "settings duration as number is seconds", e: ent(bs, "", "", `{"Timeout":5}`),
			canon: `{"MaxRequests":1,"Interval":"0s","Timeout":"5s","FailureThreshold":6,"Enabled":true}`},
		{name: "settings duration as bool", e: ent(bs, "", "", `{"Timeout":true}`), field: "Timeout", want: "want a duration"},
		{name: "settings bad duration", e: ent(bs, "", "", `{"Timeout":"5 parsecs"}`), field: "Timeout", want: "invalid duration"},
		{name: "settings count as string", e: ent(bs, "", "", `{"MaxRequests":"1"}`), field: "MaxRequests", want: "want an integer"},
		{name: "settings negative count", e: ent(bs, "", "", `{"MaxRequests":-1}`), field: "MaxRequests", want: "want an integer in [0, 4294967295]"},
		{name: "settings count overflow", e: ent(bs, "", "", `{"MaxRequests":4294967296}`), field: "MaxRequests", want: "want an integer"},
		{name: "settings fractional count", e: ent(bs, "", "", `{"FailureThreshold":1.5}`), field: "FailureThreshold", want: "want an integer"},
		{name: "settings rate as string", e: ent(bs, "", "", `{"FailureRate":"0.5"}`), field: "FailureRate", want: "want a number"},
		{name: "settings bool as string", e: ent(bs, "", "", `{"Enabled":"yes"}`), field: "Enabled", want: "want true or false"},
		{name: "settings null field", e: ent(bs, "", "", `{"Enabled":null}`), field: "Enabled", want: "must not be null"},
		{name: "settings duplicate field", e: ent(bs, "", "", `{"Timeout":"1s","Timeout":"2s"}`), field: "Timeout", want: "set more than once"},
		{name: "settings array", e: ent(bs, "", "", `[1]`), want: "want a JSON object"},
		{name: "settings null", e: ent(bs, "", "", `null`), want: "want a JSON object"},
		{name: "settings string", e: ent(bs, "", "", `"x"`), want: "want a JSON object"},
		{name: "settings truncated JSON", e: ent(bs, "", "", `{"Timeout":"1s"`), want: "not valid JSON"},
		{name: "settings two values", e: ent(bs, "", "", `{} {}`), want: "not valid JSON"},
		{name: "settings empty value", e: ent(bs, "", "", ``), want: "value is required"},
		{name: "settings blank value", e: ent(bs, "", "", "  \n"), want: "value is required"},
		{name: "settings oversize", e: ent(bs, "", "", big), want: "value too large"},
		{name: "settings too deep", e: ent(bs, "", "", deep), want: "nested too deeply"},

		// history.outboundTaskBatchSize: global only, [0, 10000].
		{name: "batch zero stops reader", e: ent(KeyOutboundTaskBatchSize, "", "", `0`), canon: `0`},
		{name: "batch default", e: ent(KeyOutboundTaskBatchSize, "", "", ` 100 `), canon: `100`},
		{name: "batch max", e: ent(KeyOutboundTaskBatchSize, "", "", `10000`), canon: `10000`},
		{name: "batch negative zero", e: ent(KeyOutboundTaskBatchSize, "", "", `-0`), canon: `0`},
		{name: "batch negative", e: ent(KeyOutboundTaskBatchSize, "", "", `-1`), want: "history.outboundTaskBatchSize: must be in [0, 10000], got -1"},
		{name: "batch too large", e: ent(KeyOutboundTaskBatchSize, "", "", `10001`), want: "must be in [0, 10000]"},
		{name: "batch huge", e: ent(KeyOutboundTaskBatchSize, "", "", `99999999999999999999999`), want: "must be in [0, 10000]"},
		{name: "batch fraction", e: ent(KeyOutboundTaskBatchSize, "", "", `1.5`), want: "want an integer"},
		{name: "batch exponent", e: ent(KeyOutboundTaskBatchSize, "", "", `1e2`), want: "want an integer"},
		{name: "batch string", e: ent(KeyOutboundTaskBatchSize, "", "", `"100"`), want: "want an integer"},
		{name: "batch null", e: ent(KeyOutboundTaskBatchSize, "", "", `null`), want: "want an integer"},
		{name: "batch bool", e: ent(KeyOutboundTaskBatchSize, "", "", `true`), want: "want an integer"},
		{name: "batch per namespace", e: ent(KeyOutboundTaskBatchSize, "ns", "", `5`), field: "namespace", want: "not accepted: this key is global only"},
		{name: "batch per destination", e: ent(KeyOutboundTaskBatchSize, "", "d", `5`), field: "destination", want: "not accepted"},
		{name: "batch per pair", e: ent(KeyOutboundTaskBatchSize, "ns", "d", `5`), field: "namespace", want: "not accepted"},

		// history.outboundQueue.groupLimiter.bufferSize / concurrency: ≥ 1.
		{name: "buffer one", e: ent(KeyGroupLimiterBufferSize, "ns", "d", `1`), canon: `1`},
		{name: "buffer zero", e: ent(KeyGroupLimiterBufferSize, "", "", `0`), want: "must be in [1, 1000000], got 0"},
		{name: "buffer negative", e: ent(KeyGroupLimiterBufferSize, "", "", `-5`), want: "must be in [1,"},
		{name: "buffer object", e: ent(KeyGroupLimiterBufferSize, "", "", `{"n":1}`), want: "want an integer"},
		{name: "concurrency", e: ent(KeyGroupLimiterConcurrency, "", "d", `250`), canon: `250`},
		{name: "concurrency zero", e: ent(KeyGroupLimiterConcurrency, "", "", `0`), want: "must be in [1, 100000]"},
		{name: "concurrency too large", e: ent(KeyGroupLimiterConcurrency, "", "", `100001`), want: "must be in [1, 100000]"},

		// history.outboundQueue.hostScheduler.maxTaskRPS: (0, 1e6].
		{name: "rps fraction", e: ent(KeyHostSchedulerMaxTaskRPS, "ns", "", `0.5`), canon: `0.5`},
		{name: "rps exponent", e: ent(KeyHostSchedulerMaxTaskRPS, "", "", `1e2`), canon: `100`},
		{name: "rps tiny", e: ent(KeyHostSchedulerMaxTaskRPS, "", "", `0.0000001`), canon: `1e-7`},
		{name: "rps zero", e: ent(KeyHostSchedulerMaxTaskRPS, "", "", `0`), want: "must be in (0, 1000000], got 0"},
		{name: "rps negative", e: ent(KeyHostSchedulerMaxTaskRPS, "", "", `-1`), want: "must be in (0,"},
		{name: "rps too large", e: ent(KeyHostSchedulerMaxTaskRPS, "", "", `1e7`), want: "must be in (0,"},
		{name: "rps overflow", e: ent(KeyHostSchedulerMaxTaskRPS, "", "", `1e400`), want: "want a finite number"},
		{name: "rps string", e: ent(KeyHostSchedulerMaxTaskRPS, "", "", `"100"`), want: "want a number"},

		// fusebox.breaker.hintPolicy.
		{name: "hint probe", e: ent(KeyBreakerHintPolicy, "", "", `"probe"`), canon: `"probe"`},
		{name: "hint adopt", e: ent(KeyBreakerHintPolicy, "ns", "d", `"adopt"`), canon: `"adopt"`},
		{name: "hint off", e: ent(KeyBreakerHintPolicy, "", "d", `"off"`), canon: `"off"`},
		{name: "hint wrong case", e: ent(KeyBreakerHintPolicy, "", "", `"PROBE"`), want: `must be one of probe, adopt, off, confirm, got "PROBE"`},
		{name: "hint empty", e: ent(KeyBreakerHintPolicy, "", "", `""`), want: "must be one of"},
		{name: "hint number", e: ent(KeyBreakerHintPolicy, "", "", `1`), want: "want a string"},

		// Request timeouts: duration string in (0, 24h].
		{name: "nexus timeout", e: ent(KeyNexusRequestTimeout, "", "", `"10s"`), canon: `"10s"`},
		{name: "nexus timeout normalized", e: ent(KeyNexusRequestTimeout, "ns", "d", `"90s"`), canon: `"1m30s"`},
		{name: "nexus timeout sub-second", e: ent(KeyNexusRequestTimeout, "", "", `"1500ms"`), canon: `"1.5s"`},
		{name: "nexus timeout zero", e: ent(KeyNexusRequestTimeout, "", "", `"0s"`), want: "must be in (0, 24h0m0s], got 0s"},
		{name: "nexus timeout negative", e: ent(KeyNexusRequestTimeout, "", "", `"-1s"`), want: "must be in (0,"},
		{name: "nexus timeout too long", e: ent(KeyNexusRequestTimeout, "", "", `"25h"`), want: "must be in (0,"},
		{name: "nexus timeout number is seconds", e: ent(KeyNexusRequestTimeout, "", "", `10`), canon: `"10s"`},
		{name: "nexus timeout fractional seconds", e: ent(KeyNexusRequestTimeout, "", "", `1.5`), canon: `"1.5s"`},
		{name: "nexus timeout unitless string is seconds", e: ent(KeyNexusRequestTimeout, "", "", `"10"`), canon: `"10s"`},
		{name: "nexus timeout days", e: ent(KeyNexusRequestTimeout, "", "", `"1d"`), canon: `"24h0m0s"`},
		{name: "nexus timeout days over the limit", e: ent(KeyNexusRequestTimeout, "", "", `"1d1s"`), want: "must be in (0, 24h0m0s], got 24h0m1s"},
		{name: "nexus timeout number zero", e: ent(KeyNexusRequestTimeout, "", "", `0`), want: "must be in (0,"},
		{name: "nexus timeout huge number", e: ent(KeyNexusRequestTimeout, "", "", `1e300`), want: "out of range"},
		{name: "nexus timeout huge days", e: ent(KeyNexusRequestTimeout, "", "", `"9999999999999d"`), want: "invalid duration"},
		{name: "nexus timeout bool", e: ent(KeyNexusRequestTimeout, "", "", `true`), want: "want a duration"},
		{name: "retry initial default unit", e: ent(KeyNexusRetryInitialInterval, "ns", "ep", `"2"`), canon: `"2s"`},
		{name: "retry max days", e: ent(KeyCallbackRetryMaxInterval, "", "", `"2d"`), canon: `"48h0m0s"`},
		{name: "retry max too long", e: ent(KeyCallbackRetryMaxInterval, "", "", `"31d"`), want: "must be in (0, 720h0m0s]"},
		{name: "min request timeout zero allowed", e: ent(KeyNexusMinRequestTimeout, "ns", "", `0`), canon: `"0s"`},
		{name: "min request timeout no destination", e: ent(KeyNexusMinRequestTimeout, "", "ep", `"1s"`), field: "destination", want: "not accepted"},
		{name: "dlq attempts", e: ent(KeyTaskDLQUnexpectedErrorAttempts, "", "", `70`), canon: `70`},
		{name: "dlq attempts zero", e: ent(KeyTaskDLQUnexpectedErrorAttempts, "", "", `0`), want: "must be in [1, 1000000]"},
		{name: "dlq attempts global only", e: ent(KeyTaskDLQUnexpectedErrorAttempts, "ns", "", `3`), field: "namespace", want: "not accepted"},
		{name: "schedule-to-close default", e: ent(KeyTaskScheduleToCloseTimeout, "ns", "ep", `"7d"`), canon: `"168h0m0s"`},
		{name: "schedule-to-close none", e: ent(KeyTaskScheduleToCloseTimeout, "", "", `0`), canon: `"0s"`},
		{name: "schedule-to-close negative", e: ent(KeyTaskScheduleToCloseTimeout, "", "", `"-1s"`), want: "must be in [0, 87600h0m0s]"},
		{name: "callback timeout", e: ent(KeyCallbackRequestTimeout, "", "d", `"2m"`), canon: `"2m0s"`},
		{name: "callback timeout garbage", e: ent(KeyCallbackRequestTimeout, "", "", `"soon"`), want: "invalid duration"},

		// fusebox.redaction.headerNames: a list of header names.
		{name: "redact names canonical", e: ent(KeyRedactHeaderNames, "ns", "", ` ["X-Sig", "x-tenant", "X-SIG"] `), canon: `["x-sig","x-tenant"]`},
		{name: "redact names empty", e: ent(KeyRedactHeaderNames, "", "", `[]`), canon: `[]`},
		{name: "redact names not a list", e: ent(KeyRedactHeaderNames, "", "", `"X-Sig"`), want: "want a JSON array"},
		{name: "redact names bad name", e: ent(KeyRedactHeaderNames, "", "", `["ok","bad name"]`), field: "[1]", want: "not an HTTP header name"},
		{name: "redact names number", e: ent(KeyRedactHeaderNames, "", "", `[1]`), field: "[0]", want: "want a header name string"},
		{name: "redact names too many", e: ent(KeyRedactHeaderNames, "", "", `[`+strings.TrimSuffix(strings.Repeat(`"a",`, MaxListEntries+1), ",")+`]`), want: "limit 100"},

		// component.callbacks.allowedAddresses: Temporal's shape.
		{name: "allowlist canonical", e: ent(KeyCallbackAllowedAddresses, "ns", "", `[{"Pattern":"*.Example.com"},{"AllowInsecure":true,"Pattern":"127.0.0.1:*"}]`),
			canon: `[{"Pattern":"*.example.com","AllowInsecure":false},{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`},
		{name: "allowlist ipv6", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"Pattern":"[::1]:8080"}]`), canon: `[{"Pattern":"[::1]:8080","AllowInsecure":false}]`},
		{name: "allowlist empty refuses all", e: ent(KeyCallbackAllowedAddresses, "", "", `[]`), canon: `[]`},
		{name: "allowlist missing pattern", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"AllowInsecure":true}]`), field: "[0].Pattern", want: "required"},
		{name: "allowlist empty pattern", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"Pattern":""}]`), field: "[0].Pattern", want: "required"},
		{name: "allowlist scheme in pattern", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"Pattern":"a.com"},{"Pattern":"https://b.com"}]`), field: "[1].Pattern", want: "no scheme"},
		{name: "allowlist field case-insensitive (Temporal)", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"pattern":"a.com","allowinsecure":true}]`),
			canon: `[{"Pattern":"a.com","AllowInsecure":true}]`},
		{name: "allowlist two spellings", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"pattern":"a.com","Pattern":"b.com"}]`), field: "[0].Pattern", want: "set more than once"},
		{name: "allowlist unknown field", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"Pattern":"a.com","Port":1}]`), field: "[0].Port", want: "unknown field"},
		{name: "allowlist duplicate field", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"Pattern":"a.com","Pattern":"b.com"}]`), field: "[0].Pattern", want: "more than once"},
		{name: "allowlist insecure not bool", e: ent(KeyCallbackAllowedAddresses, "", "", `[{"Pattern":"a.com","AllowInsecure":"yes"}]`), field: "[0].AllowInsecure", want: "true or false"},
		{name: "allowlist not objects", e: ent(KeyCallbackAllowedAddresses, "", "", `["a.com"]`), field: "[0]", want: "want an object"},
		{name: "allowlist per destination refused", e: ent(KeyCallbackAllowedAddresses, "", "d", `[]`), field: "destination", want: "not accepted"},

		// Constraints are untrusted too.
		{name: "namespace control char", e: ent(KeyGroupLimiterBufferSize, "ns\n", "", `1`), field: "namespace", want: "non-printable"},
		{name: "destination too long", e: ent(KeyGroupLimiterBufferSize, "", strings.Repeat("d", MaxNameBytes+1), `1`), field: "destination", want: "too long"},
		{name: "destination bad utf8", e: ent(KeyGroupLimiterBufferSize, "", "d\xff", `1`), field: "destination", want: "UTF-8"},
		{name: "namespace leading space", e: ent(KeyGroupLimiterBufferSize, " ns", "", `1`), field: "namespace", want: "start with a space"},
		{name: "destination trailing space", e: ent(KeyGroupLimiterBufferSize, "", "d ", `1`), field: "destination", want: "end with a space"},
		{name: "destination inner space ok", e: ent(KeyGroupLimiterBufferSize, "", "my endpoint", `7`), canon: `7`},

		// fusebox.breaker.maxRetryAfter: [0, 24h], 0 ignores Retry-After.
		{name: "max retry-after", e: ent(KeyBreakerMaxRetryAfter, "ns", "d", `"5m"`), canon: `"5m0s"`},
		{name: "max retry-after off", e: ent(KeyBreakerMaxRetryAfter, "", "", `0`), canon: `"0s"`},
		{name: "max retry-after too long", e: ent(KeyBreakerMaxRetryAfter, "", "", `"25h"`), want: "must be in [0, 24h0m0s]"},
		{name: "max retry-after negative", e: ent(KeyBreakerMaxRetryAfter, "", "", `"-1s"`), want: "must be in [0, 24h0m0s]"},

		// fusebox.destination.fleetRPS: [0, 1e6], 0 is off.
		{name: "fleet rps", e: ent(KeyFleetRPS, "ns", "d", `200`), canon: `200`},
		{name: "fleet rps fractional", e: ent(KeyFleetRPS, "", "d", `0.5`), canon: `0.5`},
		{name: "fleet rps off", e: ent(KeyFleetRPS, "", "", `0`), canon: `0`},
		{name: "fleet rps negative", e: ent(KeyFleetRPS, "", "", `-1`), want: "must be in [0, 1000000]"},
		{name: "fleet rps string", e: ent(KeyFleetRPS, "", "", `"200"`), want: "want a number"},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range validateCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.e)
			canon, cerr := Canonical(tc.e)
			if (err == nil) != (cerr == nil) {
				t.Fatalf("Validate err %v but Canonical err %v", err, cerr)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate(%s) = %v, want ok", tc.e.Value, err)
				}
				if string(canon) != tc.canon {
					t.Fatalf("Canonical = %s, want %s", canon, tc.canon)
				}
				// Round trip: the canonical value is valid and canonical.
				again, err := Canonical(Entry{Key: tc.e.Key, Namespace: tc.e.Namespace, Destination: tc.e.Destination, Value: canon})
				if err != nil || !bytes.Equal(again, canon) {
					t.Fatalf("Canonical(canonical %s) = %s, %v", canon, again, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%.80s) = nil, want error containing %q", tc.e.Value, tc.want)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is %T, want *ValidationError", err, err)
			}
			if ve.Key != tc.e.Key || ve.Field != tc.field {
				t.Fatalf("error key/field = %q/%q, want %q/%q (%v)", ve.Key, ve.Field, tc.e.Key, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.e.Key+": ") {
				t.Fatalf("error %q does not start with the key", err)
			}
			if len(err.Error()) > 512 {
				t.Fatalf("error message is %d bytes; untrusted input must not be echoed at length", len(err.Error()))
			}
		})
	}
}

func TestValidateUnknownKey(t *testing.T) {
	for _, key := range []string{"", "history.nope", "HISTORY.OUTBOUNDTASKBATCHSIZE", strings.Repeat("k", 5000)} {
		err := Validate(ent(key, "", "", `1`))
		if !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("Validate(key %.20q) = %v, want ErrUnknownKey", key, err)
		}
		var ve *ValidationError
		if errors.As(err, &ve) {
			t.Fatalf("unknown key gave a ValidationError: %v", err)
		}
		// It says the key is unknown and lists nothing else.
		for _, k := range Keys() {
			if strings.Contains(err.Error(), k.Name) {
				t.Fatalf("error %q lists registered key %s", err, k.Name)
			}
		}
		if len(err.Error()) > 400 {
			t.Fatalf("error echoes %d bytes", len(err.Error()))
		}
		if _, err := Canonical(ent(key, "", "", `1`)); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("Canonical unknown key = %v", err)
		}
	}
}

func TestKeys(t *testing.T) {
	keys := Keys()
	want := map[string]struct {
		typ         string
		def         string
		constraints string
	}{
		KeyBreakerSettings:          {"object", defaultSettingsJSON, "global,namespace,destination,namespace+destination"},
		KeyOutboundTaskBatchSize:    {"int", "100", "global"},
		KeyGroupLimiterBufferSize:   {"int", "100", "global,namespace,destination,namespace+destination"},
		KeyGroupLimiterConcurrency:  {"int", "100", "global,namespace,destination,namespace+destination"},
		KeyHostSchedulerMaxTaskRPS:  {"float", "100", "global,namespace,destination,namespace+destination"},
		KeyBreakerHintPolicy:        {"enum(probe|adopt|off|confirm)", `"confirm"`, "global,namespace,destination,namespace+destination"},
		KeyNexusRequestTimeout:      {"duration", `"10s"`, "global,namespace,destination,namespace+destination"},
		KeyCallbackRequestTimeout:   {"duration", `"10s"`, "global,namespace,destination,namespace+destination"},
		KeyTaskRetention:            {"duration", `"24h0m0s"`, "global"},
		KeyTaskMaxShardBacklog:      {"int", "10000", "global"},
		KeyRedactHeaderNames:        {"list(string)", "[]", "global,namespace,destination,namespace+destination"},
		KeyCallbackAllowedAddresses: {"list(object)", "[]", "global,namespace"},

		KeyTaskMaxDestinationBacklog:      {"int", "100000", "global,namespace,destination,namespace+destination"},
		KeyTaskMaxPendingTasks:            {"int", "1000000", "global"},
		KeyTaskMinFreeDiskMB:              {"int", "256", "global"},
		KeyNexusRetryInitialInterval:      {"duration", `"1s"`, "global,namespace,destination,namespace+destination"},
		KeyNexusRetryMaxInterval:          {"duration", `"1h0m0s"`, "global,namespace,destination,namespace+destination"},
		KeyCallbackRetryInitialInterval:   {"duration", `"1s"`, "global,namespace,destination,namespace+destination"},
		KeyCallbackRetryMaxInterval:       {"duration", `"1h0m0s"`, "global,namespace,destination,namespace+destination"},
		KeyNexusMinRequestTimeout:         {"duration", `"1.5s"`, "global,namespace"},
		KeyTaskDLQUnexpectedErrorAttempts: {"int", "70", "global"},
		KeyNexusMaxScheduleToCloseTimeout: {"duration", `"0s"`, "global,namespace"},
		KeyTaskScheduleToCloseTimeout:     {"duration", `"168h0m0s"`, "global,namespace,destination,namespace+destination"},
		KeyMetricsDestinationSeriesLimit:  {"int", "100", "global"},
		KeyRampStartRPS:                   {"float", "10", "global,namespace,destination,namespace+destination"},
		KeyRampDuration:                   {"duration", `"10s"`, "global,namespace,destination,namespace+destination"},
		KeyBreakerMaxRetryAfter:           {"duration", `"10m0s"`, "global,namespace,destination,namespace+destination"},
		KeyDestinationHealthPath:          {"path", `""`, "global,namespace,destination,namespace+destination"},
		KeyFleetRPS:                       {"float", "0", "global,namespace,destination,namespace+destination"},
		KeyTaskMaxOutputBytes:             {"int", "1048576", "global,namespace,destination,namespace+destination"},
		KeyBreakerCallThroughPeer:         {"enum(on|off)", `"on"`, "global,namespace,destination,namespace+destination"},
	}
	if len(keys) != len(want) {
		t.Fatalf("Keys() has %d keys, want %d", len(keys), len(want))
	}
	for _, k := range keys {
		w, ok := want[k.Name]
		if !ok {
			t.Fatalf("unexpected key %s", k.Name)
		}
		var cs []string
		for _, c := range k.Constraints {
			cs = append(cs, c.String())
		}
		if k.Type != w.typ || string(k.Default) != w.def || strings.Join(cs, ",") != w.constraints || k.Description == "" {
			t.Errorf("%s = {%s %s %v %q}, want {%s %s %s}", k.Name, k.Type, k.Default, cs, k.Description, w.typ, w.def, w.constraints)
		}
		// The default is itself a valid, canonical global value.
		canon, err := Canonical(Entry{Key: k.Name, Value: k.Default})
		if err != nil || !bytes.Equal(canon, k.Default) {
			t.Errorf("default of %s is not canonical: %s, %v", k.Name, canon, err)
		}
		if !IsKey(k.Name) {
			t.Errorf("IsKey(%s) = false", k.Name)
		}
	}
	// The API serves the list as JSON; constraints are words.
	b, err := json.Marshal(keys[1])
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, `"constraints":["global"]`) || !strings.Contains(got, `"default":100`) {
		t.Fatalf("KeyInfo JSON = %s", got)
	}
	// Callers get a copy.
	keys[0].Default[0] = 'X'
	if Keys()[0].Default[0] == 'X' {
		t.Fatal("Keys() shares its defaults with the caller")
	}
}

func TestConstraintText(t *testing.T) {
	for c := ConstraintDefault; c <= ConstraintNamespaceDestination; c++ {
		b, err := c.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Constraint
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Fatalf("round trip of %v: %v, %v", c, back, err)
		}
	}
	var c Constraint
	if err := c.UnmarshalText([]byte("planet")); err == nil {
		t.Fatal("UnmarshalText accepted an unknown constraint")
	}
	if _, err := Constraint(99).MarshalText(); err == nil {
		t.Fatal("MarshalText accepted an invalid constraint")
	}
}
