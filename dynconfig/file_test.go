package dynconfig

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseTemporalFile(t *testing.T) {
	data, err := os.ReadFile("testdata/temporal-dynamicconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFile(data)
	if err != nil {
		t.Fatal(err)
	}
	var unknown []string
	for _, u := range f.Unknown {
		unknown = append(unknown, u.Name)
	}
	if got := strings.Join(unknown, ","); got != "limit.maxIDLength,frontend.workerVersioningDataAPIs,matching.numTaskqueueReadPartitions" {
		t.Errorf("unknown keys = %s", got)
	}
	type kv struct{ key, ns, dest, value string }
	want := []kv{
		{KeyTaskDLQUnexpectedErrorAttempts, "", "", `20`},
		{KeyNexusRetryInitialInterval, "", "", `"2s"`},
		{KeyNexusRetryMaxInterval, "", "", `"10m0s"`},
		{KeyNexusRetryMaxInterval, "payments", "billing-endpoint", `"12h0m0s"`},
		{KeyCallbackRetryMaxInterval, "payments", "", `"30m0s"`},
		{KeyNexusRequestTimeout, "", "billing-endpoint", `"30s"`},
		{KeyNexusMinRequestTimeout, "payments", "", `"2s"`},
		{KeyBreakerSettings, "", "", `{"MaxRequests":2,"Interval":"0s","Timeout":"45s","FailureThreshold":6,"Enabled":true}`},
		{KeyBreakerSettings, "", "billing-endpoint", `{"MaxRequests":1,"Interval":"0s","Timeout":"24h0m0s","FailureThreshold":6,"Enabled":true}`},
		{KeyCallbackAllowedAddresses, "payments", "", `[{"Pattern":"*.example.com","AllowInsecure":false}]`},
		{KeyTaskScheduleToCloseTimeout, "", "", `"72h0m0s"`},
	}
	if len(f.Values) != len(want) {
		t.Fatalf("got %d values, want %d: %+v", len(f.Values), len(want), f.Values)
	}
	for i, w := range want {
		v := f.Values[i]
		if v.Key != w.key || v.Namespace != w.ns || v.Destination != w.dest || string(v.Value) != w.value {
			t.Errorf("value %d = {%s %q %q %s}, want %+v", i, v.Key, v.Namespace, v.Destination, v.Value, w)
		}
		if v.Line == 0 {
			t.Errorf("value %d has no line", i)
		}
	}
	if len(f.Keys) != 9 {
		t.Errorf("keys = %v, want the 9 registered keys of the file", f.Keys)
	}
	// The values snapshot as they would resolve.
	s, err := NewSnapshot(f.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if i, m := s.RetryPolicy("nexusoperations.Invocation", "payments", "billing-endpoint"); i.String() != "2s" || m.String() != "12h0m0s" {
		t.Errorf("RetryPolicy = %v, %v", i, m)
	}
}

func TestParseFileRefusesWhole(t *testing.T) {
	data, err := os.ReadFile("testdata/temporal-dynamicconfig-bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseFile(data)
	var fe *FileError
	if !errors.As(err, &fe) || len(fe.Problems) != 1 {
		t.Fatalf("err = %v, want one problem", err)
	}
	p := fe.Problems[0]
	if p.Key != KeyCallbackRetryInitialInterval || p.Index != 1 || p.Line != 6 || !strings.Contains(p.Reason, `invalid duration "soon"`) {
		t.Errorf("problem = %+v", p)
	}
	if !strings.Contains(err.Error(), "component.callbacks.retryPolicy.initialInterval[1] (line 6): invalid duration") {
		t.Errorf("message = %s", err)
	}
}

func TestParseFileProblems(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"not yaml", "a: [", "not valid YAML"},
		{"not a mapping", "- 1\n- 2\n", "want a mapping of key"},
		{"value not a list", "history.outboundTaskBatchSize: 5\n", "history.outboundTaskBatchSize (line 1): want a list"},
		{"item not a mapping", "history.outboundTaskBatchSize:\n  - 5\n", "history.outboundTaskBatchSize[0] (line 2): want a mapping"},
		{"missing value", "history.outboundTaskBatchSize:\n  - constraints: {}\n", "[0] (line 2): value: required"},
		{"misspelt field", "history.outboundTaskBatchSize:\n  - value: 5\n    contraints: {namespace: a}\n", "contraints: unknown field"},
		{"global-only key with a namespace", "history.outboundTaskBatchSize:\n  - value: 5\n    constraints: {namespace: a}\n", "namespace: not accepted"},
		{"task queue constraint", "history.outboundQueue.groupLimiter.concurrency:\n  - value: 5\n    constraints: {taskQueueName: q}\n",
			"constraints.taskQueueName: fusebox supports only the namespace and destination constraints"},
		{"unknown constraint", "history.outboundQueue.groupLimiter.concurrency:\n  - value: 5\n    constraints: {region: eu}\n", "unknown constraint"},
		{"constraint not a string", "history.outboundQueue.groupLimiter.concurrency:\n  - value: 5\n    constraints: {namespace: [a]}\n", "must be a string"},
		{"same constraints twice", "history.outboundQueue.groupLimiter.concurrency:\n  - value: 5\n  - value: 6\n", "[1] (line 3): constraints: same constraints as value [0]"},
		{"key twice by case", "history.outboundTaskBatchSize:\n  - value: 5\nHISTORY.outboundTaskBatchSize:\n  - value: 6\n", "key set again (first at line 1"},
		{"alias and name", "callback.request.timeout:\n  - value: 5\ncomponent.callbacks.request.timeout:\n  - value: 6\n", "key set again"},
		{"non-string map key", "history.outboundQueue.circuitBreakerSettings:\n  - value: {1: 2}\n", "not a string"},
		{"infinite", "history.outboundQueue.hostScheduler.maxTaskRPS:\n  - value: .inf\n", "not representable as JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFile([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseFileEmptyAndCleared(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "~\n"} {
		f, err := ParseFile([]byte(in))
		if err != nil || len(f.Keys)+len(f.Values)+len(f.Unknown) != 0 {
			t.Errorf("ParseFile(%q) = %+v, %v", in, f, err)
		}
	}
	f, err := ParseFile([]byte("history.outboundTaskBatchSize:\n"))
	if err != nil || len(f.Keys) != 1 || len(f.Values) != 0 {
		t.Errorf("a key without values clears it: %+v, %v", f, err)
	}
}

// FuzzParseFile: ParseFile never panics; what it accepts is canonical.
func FuzzParseFile(f *testing.F) {
	for _, name := range []string{"testdata/temporal-dynamicconfig.yaml", "testdata/temporal-dynamicconfig-bad.yaml"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("history.outboundTaskBatchSize:\n  - value: 5\n    constraints: {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile(data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || len(fe.Problems) == 0 {
				t.Fatalf("error %v is not a FileError with problems", err)
			}
			return
		}
		for _, v := range file.Values {
			canon, err := Canonical(v.Entry)
			if err != nil || string(canon) != string(v.Value) || !json.Valid(v.Value) {
				t.Fatalf("value %+v is not canonical: %s, %v", v, canon, err)
			}
		}
	})
}
