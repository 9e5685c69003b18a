package main

import (
	"encoding/json"
	"testing"

	"fusebox/api"
)

// breakers force/list/forced against a real node: a forced open shows as
// open with source operator; auto clears it; bad input exits 2 (or 3, when
// the cluster refuses it) naming the flag.
func TestAdminBreakersCommands(t *testing.T) {
	h := newAdminNode(t, 4)
	key := []string{"--task-group", "callbacks.Invocation", "--namespace", "ns-1", "--destination", "http://127.0.0.1:9/cb"}

	h.mustRun("forced open until", append([]string{"breakers", "force", "open", "--duration", "10m", "--reason", "maintenance"}, key...)...)
	// The node applies the forced state to its pool after the write commits.
	out := h.eventually("forced-open", "breakers", "list")
	var l api.BreakerList
	if err := json.Unmarshal([]byte(h.mustRun(`"state": "open"`, "breakers", "list", "--cluster", "--json")), &l); err != nil ||
		len(l.Breakers) != 1 || l.Breakers[0].Node != "n1" || l.Breakers[0].Source != "operator" {
		t.Fatalf("list --cluster --json: %+v, %v (table was:\n%s)", l, err, out)
	}
	h.mustRun("maintenance", "breakers", "forced")
	h.mustRun("forced auto", append([]string{"breakers", "force", "auto"}, key...)...)
	h.mustRun("TASK GROUP", "breakers", "forced")
	// Bad usage the CLI sees itself exits 2 naming the flag; what only the
	// cluster can judge (the longest force) exits 3, named by the flag too.
	h.wantExit(2, "mode", append([]string{"breakers", "force", "sideways"}, key...)...)
	h.wantExit(2, "--duration", append([]string{"breakers", "force", "closed", "--duration", "1m"}, key...)...)
	h.wantExit(2, "--task-group", "breakers", "force", "open", "--destination", "x")
	h.wantExit(3, "--duration", append([]string{"breakers", "force", "open", "--duration", "9999h"}, key...)...)
}
