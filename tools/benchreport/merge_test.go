package main

import (
	"os"
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
	got := mergeReport(prevReport, freshReport("| #1 | a | 9 x | - | - | - |  | `cmd a` |\n"), false, "", "", nil)
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
	got := mergeReport(prevReport, fresh, true, "B|C", "hypervisor steal 7 % of the CPU time", nil)
	want := "| #1 | a | 1 x | - | - | - |  | `cmd a` |\n| #1 | b | 7 x | - | - | - |  | `cmd b` |\n| #2 | c | 3 x | - | - | - |  | `cmd c` |\n\n## Notes"
	if !strings.Contains(got, want) {
		t.Fatalf("rows not merged in place:\n%s", got)
	}
	if !strings.Contains(got, "Generated on day 1.") || !strings.Contains(got, "Rows matching `-only 'B|C'`") {
		t.Fatalf("head not kept with a note:\n%s", got)
	}
	if !strings.Contains(got, "`go run ./tools/benchreport -only 'B|C'`, hypervisor steal 7 % of the CPU time); the others") {
		t.Fatalf("the note does not carry the run's steal:\n%s", got)
	}
	again := mergeReport(got, fresh, true, "B|C", "", nil)
	if n := strings.Count(again, "Rows matching `-only 'B|C'`"); n != 1 {
		t.Fatalf("a second partial run left %d notes:\n%s", n, again)
	}
}

func TestMergeWithoutPreviousReport(t *testing.T) {
	fresh := freshReport("| #1 | a | 9 x | - | - | - |  | `cmd a` |\n")
	if got := mergeReport("", fresh, true, "A", "", nil); got != fresh {
		t.Fatalf("no previous report: got\n%s\nwant\n%s", got, fresh)
	}
}

// A partial run drops the previous rows whose figure the report no longer
// has, and a repeated row, instead of keeping them beside the fresh ones.
func TestMergePartialRunDropsStaleAndRepeatedRows(t *testing.T) {
	prev := "# Benchmarks\n\n" + tableHeader + "\n|---|---|---|---|---|---|---|---|\n" +
		"| #1 | a | 1 x | - | - | - |  | `cmd a` |\n" +
		"| #1 | old name | 2 x | - | - | - |  | `cmd b` |\n" +
		"| #1 |   c | 3 x | - | - | - |  | `cmd c` |\n" +
		"| #1 |   c | 4 x | - | - | - |  | `cmd c` |\n"
	known := map[string]bool{"| #1 | a": true, "| #1 | new name": true, "| #1 |   c": true}
	got := mergeReport(prev, freshReport("| #1 | new name | 5 x | - | - | - |  | `cmd b` |\n"), true, "B", "", known)
	want := "| #1 | a | 1 x | - | - | - |  | `cmd a` |\n| #1 |   c | 3 x | - | - | - |  | `cmd c` |\n| #1 | new name | 5 x | - | - | - |  | `cmd b` |\n"
	if !strings.Contains(got, want) || strings.Contains(got, "old name") || strings.Contains(got, "4 x") {
		t.Fatalf("stale or repeated rows kept:\n%s", got)
	}
}

// Every row of docs/benchmarks.md is a figure rows.go still measures, once.
func TestReportRowsAreKnown(t *testing.T) {
	md, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	known := knownRows()
	_, table, _ := splitReport(string(md))
	if len(table) == 0 {
		t.Fatal("no table in docs/benchmarks.md")
	}
	seen := map[string]bool{}
	for _, r := range table {
		k := rowKey(r)
		if !known[k] {
			t.Errorf("docs/benchmarks.md has a row rows.go does not: %q", k)
		}
		if seen[k] {
			t.Errorf("docs/benchmarks.md repeats a row: %q", k)
		}
		seen[k] = true
	}
}

// A partial run on another machine than the full run's names it in its
// note; on the same machine the note says nothing of it.
func TestMergePartialRunNamesAnotherMachine(t *testing.T) {
	head := func(m string) string {
		return "# Benchmarks\n\n- Machine: " + m + ", 2 CPUs (linux/amd64); shared and noisy, so read ratios, not absolute figures.\n\n" +
			tableHeader + "\n|---|---|---|---|---|---|---|---|\n"
	}
	prev := head("Intel Xeon") + "| #1 | a | 1 x | - | - | - |  | `cmd a` |\n"
	fresh := head("AMD EPYC") + "| #1 | a | 2 x | - | - | - |  | `cmd a` |\n"
	got := mergeReport(prev, fresh, true, "A", "hypervisor steal 0 % of the CPU time", nil)
	if !strings.Contains(got, "`go run ./tools/benchreport -only 'A'`, on AMD EPYC, 2 CPUs (linux/amd64), hypervisor steal 0 % of the CPU time); the others") {
		t.Fatalf("the note does not name the other machine:\n%s", got)
	}
	if !strings.Contains(got, "- Machine: Intel Xeon") {
		t.Fatalf("the full run's machine line was not kept:\n%s", got)
	}
	same := mergeReport(prev, head("Intel Xeon")+"| #1 | a | 2 x | - | - | - |  | `cmd a` |\n", true, "A", "", nil)
	if strings.Contains(same, ", on ") || !strings.Contains(same, "`go run ./tools/benchreport -only 'A'`); the others") {
		t.Fatalf("a run on the full run's machine named it:\n%s", same)
	}
}

// Samples are keyed by package and benchmark name: two rows that name one
// benchmark with different -benchtime in one profile would mix their runs'
// values. ("-" skips a row in that profile.)
func TestRowsOfOneBenchmarkShareTheirTimes(t *testing.T) {
	for _, profile := range []string{"full", "quick"} {
		seen := map[string]string{}
		for _, r := range rows {
			tm := r.Time
			if profile == "quick" {
				tm = r.QuickTime
			}
			if tm == "-" {
				continue
			}
			for _, name := range []string{r.Bench, r.Baseline} {
				if name == "" {
					continue
				}
				k := r.Pkg + " " + name
				if got, ok := seen[k]; ok && got != tm {
					t.Errorf("%s profile: %s is measured at -benchtime %s and at %s: give one of them a benchmark of its own", profile, k, got, tm)
				}
				seen[k] = tm
			}
		}
	}
}
