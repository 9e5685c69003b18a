package main

import (
	"strings"
	"testing"
)

const prevReport = "# Benchmarks\n\nGenerated on day 1.\n\n" + tableHeader + "\n|---|---|---|---|---|---|---|---|\n" +
	"| #1 | a | 1 x | - | - | - |  | `cmd a` |\n" +
	"| #1 | b | 2 x | - | - | - |  | `cmd b` |\n" +
	"\n## Notes\n\nhand-written\n"

func freshReport(rows ...string) string {
	return "# Benchmarks\n\nGenerated on day 2.\n\n" + tableHeader + "\n|---|---|---|---|---|---|---|---|\n" + strings.Join(rows, "")
}

func TestMergeFullRunKeepsHandWrittenTail(t *testing.T) {
	got := mergeReport(prevReport, freshReport("| #1 | a | 9 x | - | - | - |  | `cmd a` |\n"), false, "")
	for _, want := range []string{"Generated on day 2.", "| #1 | a | 9 x", "## Notes\n\nhand-written\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("full run lost %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| #1 | b |") || strings.Contains(got, "day 1") {
		t.Errorf("full run kept the old rows or head:\n%s", got)
	}
}

func TestMergePartialRunReplacesItsRowsOnly(t *testing.T) {
	fresh := freshReport("| #1 | b | 7 x | - | - | - |  | `cmd b` |\n", "| #2 | c | 3 x | - | - | - |  | `cmd c` |\n")
	got := mergeReport(prevReport, fresh, true, "B|C")
	want := "| #1 | a | 1 x | - | - | - |  | `cmd a` |\n| #1 | b | 7 x | - | - | - |  | `cmd b` |\n| #2 | c | 3 x | - | - | - |  | `cmd c` |\n\n## Notes"
	if !strings.Contains(got, want) {
		t.Fatalf("rows not merged in place:\n%s", got)
	}
	if !strings.Contains(got, "Generated on day 1.") || !strings.Contains(got, "Rows matching `-only 'B|C'`") {
		t.Fatalf("head not kept with a note:\n%s", got)
	}
	again := mergeReport(got, fresh, true, "B|C")
	if n := strings.Count(again, "Rows matching `-only 'B|C'`"); n != 1 {
		t.Fatalf("a second partial run left %d notes:\n%s", n, again)
	}
}

func TestMergeWithoutPreviousReport(t *testing.T) {
	fresh := freshReport("| #1 | a | 9 x | - | - | - |  | `cmd a` |\n")
	if got := mergeReport("", fresh, true, "A"); got != fresh {
		t.Fatalf("no previous report: got\n%s\nwant\n%s", got, fresh)
	}
}
