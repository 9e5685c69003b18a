package dynconfig

import (
	"os"
	"strings"
	"testing"
)

// The user reference in DESIGN.md names every registered key in its table,
// and no key that is not registered: docs/api.md sends users there.
func TestDesignTableNamesEveryKey(t *testing.T) {
	raw, err := os.ReadFile("DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## Keys (user reference)")
	if start < 0 {
		t.Fatal(`DESIGN.md has no "## Keys (user reference)" section`)
	}
	rows := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(doc[start:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the section's first table ends here
			}
			continue
		}
		inTable = true
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if i := strings.Index(name, "`"); i > 0 {
				rows[name[:i]] = true
			}
		}
	}
	known := map[string]bool{}
	for _, k := range Keys() {
		known[k.Name] = true
		if !rows[k.Name] {
			t.Errorf("key %s has no row in DESIGN.md's key table", k.Name)
		}
	}
	for name := range rows {
		if !known[name] {
			t.Errorf("DESIGN.md's key table has a row for %s, which is not registered", name)
		}
	}
}
