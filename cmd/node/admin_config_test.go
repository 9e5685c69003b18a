package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fusebox/api"
	"fusebox/dynconfig"
)

// `admin config import` against a real node: --dry-run shows the plan and
// writes nothing, the import applies it, a bad file exits 3 (invalid argument) naming the key,
// the index and the line, and a missing file is a usage error.
func TestAdminConfigImport(t *testing.T) {
	h := newAdminNode(t, 4)
	file := filepath.Join("..", "..", "dynconfig", "testdata", "temporal-dynamicconfig.yaml")

	out := h.mustRun("dry run: nothing written", "config", "import", file, "--dry-run")
	for _, want := range []string{
		"set     component.nexusoperations.retryPolicy.maxInterval",
		"unchanged: 0",
		"UNKNOWN KEY (not applied)",
		"matching.numTaskqueueReadPartitions",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, out)
		}
	}
	apic := api.NewClient(h.n.HTTPAddr(), "", nil)
	if l, err := apic.ConfigList(h.ctx); err != nil || len(l.Entries) != 0 {
		t.Fatalf("--dry-run wrote: %+v, %v", l.Entries, err)
	}

	h.mustRun("imported at raft index", "config", "import", file)
	es, err := apic.ConfigGet(h.ctx, dynconfig.KeyNexusRetryMaxInterval)
	found := false
	for _, e := range es {
		found = found || (e.Namespace == "payments" && e.Destination == "billing-endpoint" && string(e.Value) == `"12h0m0s"`)
	}
	if err != nil || !found {
		t.Fatalf("imported values = %+v, %v; want the canonical 12h0m0s of 0.5d for payments/billing-endpoint", es, err)
	}
	out = h.mustRun(`"unchanged": 11`, "--json", "config", "import", file)
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}

	h.wantExit(3, "component.callbacks.retryPolicy.initialInterval[1] (line 6)", "config", "import",
		filepath.Join("..", "..", "dynconfig", "testdata", "temporal-dynamicconfig-bad.yaml"))
	if _, err := os.Stat("no-such.yaml"); err == nil {
		t.Fatal("no-such.yaml exists")
	}
	if _, err := h.run("config", "import", "no-such.yaml"); err == nil || !strings.Contains(err.Error(), "no-such.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}
