package api

import (
	"encoding/json"
	"strings"
	"testing"

	"fusebox/raftstore/state"
)

// A forced breaker's history value is shown with its destination redacted
// and its other fields kept; another key's value is shown as stored; a
// forced breaker's value that does not decode is not shown.
func TestHistoryValueRedactsForcedDestination(t *testing.T) {
	row, _ := json.Marshal(state.ForcedBreaker{TaskGroup: "callbacks.Invocation", NamespaceID: "ns",
		Destination: "https://u:pw@hooks.example.com/cb?sig=SECRET123", Mode: state.ForceAuto, Reason: "why", Index: 7})
	got := historyValue(state.HistoryEntry{Key: state.ForceBreakerHistoryKey, Value: row})
	var v state.ForcedBreaker
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if strings.Contains(string(got), "SECRET123") || strings.Contains(string(got), "pw@") ||
		v.Destination != "https://<redacted>@hooks.example.com/cb?<redacted>" || v.Reason != "why" || v.Index != 7 || v.Mode != state.ForceAuto {
		t.Errorf("shown %s", got)
	}
	other := json.RawMessage(`{"destination":"kept?as=is"}`)
	if got := historyValue(state.HistoryEntry{Key: "fusebox.some.key", Value: other}); string(got) != string(other) {
		t.Errorf("another key's value shown as %s", got)
	}
	for _, bad := range []string{`not json`, `{"destination":42}`, `["https://h/cb?sig=SECRET123"]`} {
		if got := historyValue(state.HistoryEntry{Key: state.ForceBreakerHistoryKey, Value: json.RawMessage(bad)}); got != nil {
			t.Errorf("undecodable value %s shown as %s", bad, got)
		}
	}
}
