package dynconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"fusebox/breakerpool"
)

func TestSnapshotDefaults(t *testing.T) {
	for name, s := range map[string]*Snapshot{"empty": mustSnapshot(t), "nil": nil} {
		t.Run(name, func(t *testing.T) {
			want := breakerpool.DefaultSettings()
			if got := s.BreakerSettings("ns", "d"); got != want {
				t.Errorf("BreakerSettings = %+v, want %+v", got, want)
			}
			if err := s.BreakerSettings("", "").Validate(); err != nil {
				t.Errorf("default settings invalid: %v", err)
			}
			if got := s.HintPolicy("ns", "d"); got != breakerpool.HintConfirm {
				t.Errorf("HintPolicy = %q", got)
			}
			if got := s.BatchSize(); got != 100 {
				t.Errorf("BatchSize = %d", got)
			}
			if got := s.BufferSize("ns", "d"); got != 100 {
				t.Errorf("BufferSize = %d", got)
			}
			if got := s.Concurrency("ns", "d"); got != 100 {
				t.Errorf("Concurrency = %d", got)
			}
			if got := s.MaxTaskRPS("ns", "d"); got != 100 {
				t.Errorf("MaxTaskRPS = %v", got)
			}
			for _, tg := range []string{breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation, breakerpool.TaskGroupCallback, "other"} {
				if got := s.RequestTimeout(tg, "ns", "d"); got != 10*time.Second {
					t.Errorf("RequestTimeout(%s) = %v", tg, got)
				}
			}
			for _, k := range Keys() {
				v, from, ok := s.Lookup(k.Name, "ns", "d")
				if !ok || from != ConstraintDefault || string(v) != string(k.Default) {
					t.Errorf("Lookup(%s) = %s, %v, %v; want the default", k.Name, v, from, ok)
				}
			}
			if _, _, ok := s.Lookup("no.such.key", "", ""); ok {
				t.Error("Lookup of an unknown key reported ok")
			}
			if len(s.Entries()) != 0 || s.Invalid() != nil {
				t.Error("empty snapshot has entries or errors")
			}
		})
	}
}

// levelValues are four distinct valid values per key, one per constraint
// level, and a getter returning the typed effective value.
type levelValues struct {
	key    string
	raw    [4]string // global, namespace, destination, namespace+destination
	typed  [4]any
	def    any
	getter func(s *Snapshot, ns, dest string) any
}

func precedenceKeys() []levelValues {
	maxReq := func(s *Snapshot, ns, dest string) any { return s.BreakerSettings(ns, dest).MaxRequests }
	return []levelValues{
		{KeyBreakerSettings, [4]string{`{"MaxRequests":2}`, `{"MaxRequests":3}`, `{"MaxRequests":4}`, `{"MaxRequests":5}`},
			[4]any{uint32(2), uint32(3), uint32(4), uint32(5)}, uint32(1), maxReq},
		{KeyGroupLimiterBufferSize, [4]string{`2`, `3`, `4`, `5`}, [4]any{2, 3, 4, 5}, 100,
			func(s *Snapshot, ns, dest string) any { return s.BufferSize(ns, dest) }},
		{KeyGroupLimiterConcurrency, [4]string{`2`, `3`, `4`, `5`}, [4]any{2, 3, 4, 5}, 100,
			func(s *Snapshot, ns, dest string) any { return s.Concurrency(ns, dest) }},
		{KeyHostSchedulerMaxTaskRPS, [4]string{`1.5`, `2.5`, `3.5`, `4.5`}, [4]any{1.5, 2.5, 3.5, 4.5}, 100.0,
			func(s *Snapshot, ns, dest string) any { return s.MaxTaskRPS(ns, dest) }},
		{KeyBreakerHintPolicy, [4]string{`"adopt"`, `"off"`, `"probe"`, `"adopt"`},
			[4]any{breakerpool.HintAdopt, breakerpool.HintOff, breakerpool.HintProbe, breakerpool.HintAdopt}, breakerpool.HintConfirm,
			func(s *Snapshot, ns, dest string) any { return s.BreakerSettings(ns, dest).HintPolicy }},
		{KeyNexusRequestTimeout, [4]string{`"1s"`, `"2s"`, `"3s"`, `"4s"`}, [4]any{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}, 10 * time.Second,
			func(s *Snapshot, ns, dest string) any {
				return s.RequestTimeout(breakerpool.TaskGroupNexusCancelation, ns, dest)
			}},
		{KeyCallbackRequestTimeout, [4]string{`"1s"`, `"2s"`, `"3s"`, `"4s"`}, [4]any{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}, 10 * time.Second,
			func(s *Snapshot, ns, dest string) any {
				return s.RequestTimeout(breakerpool.TaskGroupCallback, ns, dest)
			}},
	}
}

// TestPrecedence sets every subset of the four levels for (ns1, d1) and
// checks every kind of query against the rule
// namespace+destination > destination > namespace > global > default.
func TestPrecedence(t *testing.T) {
	levels := [4]Constraint{ConstraintGlobal, ConstraintNamespace, ConstraintDestination, ConstraintNamespaceDestination}
	constraintFor := [4][2]string{{"", ""}, {"ns1", ""}, {"", "d1"}, {"ns1", "d1"}}
	queries := [][2]string{{"ns1", "d1"}, {"ns1", "d2"}, {"ns2", "d1"}, {"ns2", "d2"}, {"", "d1"}, {"ns1", ""}, {"", ""}}
	for _, k := range precedenceKeys() {
		for mask := range 16 {
			var entries []Entry
			for l := range 4 {
				if mask&(1<<l) != 0 {
					entries = append(entries, ent(k.key, constraintFor[l][0], constraintFor[l][1], k.raw[l]))
				}
			}
			s := mustSnapshot(t, entries...)
			for _, q := range queries {
				// Reference resolution: the most specific level that is set
				// and matches the query.
				wantLevel := -1
				for l := 3; l >= 0; l-- {
					matches := (constraintFor[l][0] == "" || constraintFor[l][0] == q[0]) &&
						(constraintFor[l][1] == "" || constraintFor[l][1] == q[1])
					if mask&(1<<l) != 0 && matches {
						wantLevel = l
						break
					}
				}
				raw, from, ok := s.Lookup(k.key, q[0], q[1])
				got := k.getter(s, q[0], q[1])
				desc := fmt.Sprintf("%s mask %04b query %q", k.key, mask, q)
				if !ok {
					t.Fatalf("%s: Lookup not ok", desc)
				}
				if wantLevel < 0 {
					if from != ConstraintDefault || got != k.def {
						t.Fatalf("%s: got %v from %v, want default %v", desc, got, from, k.def)
					}
					continue
				}
				wantRaw, _ := Canonical(ent(k.key, "", "", k.raw[wantLevel]))
				if from != levels[wantLevel] || string(raw) != string(wantRaw) || got != k.typed[wantLevel] {
					t.Fatalf("%s: got %s (%v) from %v, want %s (%v) from %v",
						desc, raw, got, from, wantRaw, k.typed[wantLevel], levels[wantLevel])
				}
			}
		}
	}
}

func TestGlobalOnlyKey(t *testing.T) {
	s := mustSnapshot(t, ent(KeyOutboundTaskBatchSize, "", "", `0`))
	if got := s.BatchSize(); got != 0 {
		t.Fatalf("BatchSize = %d, want 0", got)
	}
	if v, from, _ := s.Lookup(KeyOutboundTaskBatchSize, "ns", "d"); string(v) != "0" || from != ConstraintGlobal {
		t.Fatalf("Lookup = %s from %v", v, from)
	}
	// A constrained value for a global-only key never makes it into a
	// snapshot, even if the store somehow holds one.
	s, err := NewSnapshot([]Entry{ent(KeyOutboundTaskBatchSize, "ns", "", `7`)})
	if err == nil || s.BatchSize() != 100 {
		t.Fatalf("constrained batch size accepted: %v, %d", err, s.BatchSize())
	}
}

// The two halves of BreakerSettings resolve independently.
func TestBreakerSettingsCombinesHintPolicy(t *testing.T) {
	s := mustSnapshot(t,
		ent(KeyBreakerSettings, "ns", "", `{"Timeout":"5s","FailureThreshold":3}`),
		ent(KeyBreakerHintPolicy, "", "d", `"adopt"`),
		ent(KeyBreakerHintPolicy, "ns", "d2", `"off"`),
	)
	want := breakerpool.DefaultSettings()
	want.Timeout = breakerpool.Duration(5 * time.Second)
	want.FailureThreshold = 3
	want.HintPolicy = breakerpool.HintAdopt
	if diff := cmp.Diff(want, s.BreakerSettings("ns", "d")); diff != "" {
		t.Fatalf("BreakerSettings(ns, d) (-want +got):\n%s", diff)
	}
	want.HintPolicy = breakerpool.HintOff
	if diff := cmp.Diff(want, s.BreakerSettings("ns", "d2")); diff != "" {
		t.Fatalf("BreakerSettings(ns, d2) (-want +got):\n%s", diff)
	}
	other := breakerpool.DefaultSettings()
	other.HintPolicy = breakerpool.HintAdopt
	if diff := cmp.Diff(other, s.BreakerSettings("ns9", "d")); diff != "" {
		t.Fatalf("BreakerSettings(ns9, d) (-want +got):\n%s", diff)
	}
}

func TestNewSnapshotSkipsInvalid(t *testing.T) {
	entries := []Entry{
		ent(KeyGroupLimiterBufferSize, "", "", `7`),
		ent("no.such.key", "", "", `1`),
		ent(KeyGroupLimiterConcurrency, "", "", `0`),
		{Key: KeyBreakerSettings}, // nil value
		ent(KeyBreakerSettings, "", "", `{"Timeout":"-1s"}`),
		ent(KeyHostSchedulerMaxTaskRPS, "ns", "", `12`),
	}
	s, err := NewSnapshot(entries)
	if err == nil {
		t.Fatal("NewSnapshot reported no invalid entries")
	}
	if !errors.Is(err, ErrUnknownKey) || s.Invalid() != err {
		t.Fatalf("error %v does not carry the causes", err)
	}
	for _, want := range []string{"no.such.key", KeyGroupLimiterConcurrency, "Timeout: must not be negative", "value is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if s.BufferSize("", "") != 7 || s.MaxTaskRPS("ns", "x") != 12 || s.Concurrency("", "") != 100 ||
		s.BreakerSettings("", "") != breakerpool.DefaultSettings() {
		t.Fatal("valid entries not applied or invalid ones not skipped")
	}
	if len(s.Entries()) != 2 {
		t.Fatalf("Entries = %v", s.Entries())
	}
}

func TestNewSnapshotDuplicateLastWins(t *testing.T) {
	s, err := NewSnapshot([]Entry{
		ent(KeyGroupLimiterBufferSize, "ns", "", `7`),
		ent(KeyGroupLimiterBufferSize, "ns", "", `8`),
	})
	if err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Fatalf("duplicate not reported: %v", err)
	}
	if got := s.BufferSize("ns", ""); got != 8 {
		t.Fatalf("BufferSize = %d, want the last value 8", got)
	}
	if len(s.Entries()) != 1 || string(s.Entries()[0].Value) != "8" {
		t.Fatalf("Entries = %v", s.Entries())
	}
}

func TestSnapshotEntriesCanonicalAndSorted(t *testing.T) {
	s := mustSnapshot(t,
		ent(KeyNexusRequestTimeout, "b", "", `"90s"`),
		ent(KeyBreakerSettings, "", "", ` { "MaxRequests" : 2 } `),
		ent(KeyNexusRequestTimeout, "a", "z", `"1m"`),
		ent(KeyNexusRequestTimeout, "a", "", `"2s"`),
	)
	got, err := json.Marshal(s.Entries())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"key":"component.nexusoperations.request.timeout","namespace":"a","value":"2s"},` +
		`{"key":"component.nexusoperations.request.timeout","namespace":"a","destination":"z","value":"1m0s"},` +
		`{"key":"component.nexusoperations.request.timeout","namespace":"b","value":"1m30s"},` +
		`{"key":"history.outboundQueue.circuitBreakerSettings","value":{"MaxRequests":2,"Interval":"0s","Timeout":"1m0s","FailureThreshold":6,"Enabled":true}}]`
	if string(got) != want {
		t.Fatalf("Entries JSON\n got %s\nwant %s", got, want)
	}
	// Rebuilding from the canonical entries gives an equal snapshot.
	if again := mustSnapshot(t, s.Entries()...); !again.Equal(s) {
		t.Fatal("snapshot of canonical entries differs")
	}
}

// Every JSON field of breakerpool.Settings decodes: a fully set value
// survives Canonical unchanged.
func TestSettingsAllFieldsRoundTrip(t *testing.T) {
	in := breakerpool.Settings{
		MaxRequests: 4, Interval: breakerpool.Duration(30 * time.Second), Timeout: breakerpool.Duration(7 * time.Second),
		FailureThreshold: 9, FailureRate: 0.25, MinRequests: 11, BucketPeriod: breakerpool.Duration(3 * time.Second),
		Enabled: false,
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := Canonical(Entry{Key: KeyBreakerSettings, Value: raw})
	if err != nil || string(canon) != string(raw) {
		t.Fatalf("Canonical(%s) = %s, %v", raw, canon, err)
	}
	in.HintPolicy = breakerpool.HintConfirm
	in.MaxRetryAfter = breakerpool.Duration(breakerpool.DefaultMaxRetryAfter)
	if got := mustSnapshot(t, Entry{Key: KeyBreakerSettings, Value: raw}).BreakerSettings("", ""); got != in {
		t.Fatalf("BreakerSettings = %+v, want %+v", got, in)
	}
	if len(settingsFields) != 8 {
		t.Fatalf("decoder knows %d Settings fields, want 8", len(settingsFields))
	}
}

// buildSnapshot reuses the previous snapshot's decoded values for unchanged
// canonical entries and decodes changed ones.
func TestBuildSnapshotReuse(t *testing.T) {
	prev := mustSnapshot(t,
		ent(KeyBreakerSettings, "ns", "d", `{"Timeout":"3s"}`),
		ent(KeyGroupLimiterBufferSize, "", "d", `4`),
	)
	canon := prev.Entries()
	next, err := buildSnapshot(canon, prev)
	if err != nil || !next.Equal(prev) {
		t.Fatalf("rebuild: %v", err)
	}
	if next.keys[idxBreakerSettings].byNSDest[pair{"ns", "d"}] != prev.keys[idxBreakerSettings].byNSDest[pair{"ns", "d"}] {
		t.Fatal("unchanged value was decoded again")
	}
	changed := []Entry{canon[0], ent(KeyGroupLimiterBufferSize, "", "d", `5`), ent(KeyGroupLimiterBufferSize, "ns", "d", `6`)}
	next, err = buildSnapshot(changed, prev)
	if err != nil {
		t.Fatal(err)
	}
	if next.BufferSize("x", "d") != 5 || next.BufferSize("ns", "d") != 6 || next.BreakerSettings("ns", "d").Timeout.D() != 3*time.Second {
		t.Fatal("changed values not applied")
	}
	// The same bytes at another constraint are validated, not reused.
	if _, err := buildSnapshot([]Entry{ent(KeyOutboundTaskBatchSize, "ns", "", `100`)}, mustSnapshot(t, ent(KeyOutboundTaskBatchSize, "", "", `100`))); err == nil {
		t.Fatal("constrained global-only value accepted through reuse")
	}
}
