package main

import (
	"fmt"
	"strings"
	"time"
)

// tableHeader opens the generated table in docs/benchmarks.md.
const tableHeader = "| issue | figure | value | baseline | ratio | target | ok | reproduce |"

// splitReport cuts a report into what comes before the table, the table's
// data rows and what follows it (hand-written sections, kept by every run).
// A report without the table is all head.
func splitReport(md string) (head string, rows []string, tail string) {
	lines := strings.SplitAfter(md, "\n")
	i := 0
	for i < len(lines) && strings.TrimRight(lines[i], "\n") != tableHeader {
		i++
	}
	if i == len(lines) {
		return md, nil, ""
	}
	head = strings.Join(lines[:i], "")
	j := i + 2 // the header and its |---| line
	for j < len(lines) && strings.HasPrefix(lines[j], "|") {
		rows = append(rows, lines[j])
		j++
	}
	return head, rows, strings.Join(lines[j:], "")
}

// rowKey is what identifies a row across runs: its issue and figure.
func rowKey(line string) string {
	f := strings.SplitN(line, " | ", 3)
	if len(f) < 3 {
		return line
	}
	return f[0] + " | " + f[1]
}

// knownRows is the keys (rowKey) of every row rows.go measures.
func knownRows() map[string]bool {
	known := make(map[string]bool, len(rows))
	for _, r := range rows {
		known[rowKey(fmt.Sprintf("| %s | %s | ", r.Issue, r.What))] = true
	}
	return known
}

// mergeReport combines a fresh report with the previous one. A full run
// keeps the previous report's hand-written tail. A partial run (-only) keeps
// the previous head and every row it did not measure: its rows replace
// theirs in place, new rows go at the end of the table, and the head says
// which rows were measured when. known holds the keys (rowKey) of every
// row the report has now: a previous row that is not among them (its
// figure was renamed or removed) or repeats one already kept is dropped,
// so a partial run never keeps a stale row beside its successor. nil keeps
// every previous row. A partial run's note carries extra (the run's steal)
// when it is not empty.
func mergeReport(prev, fresh string, partial bool, only, extra string, known map[string]bool) string {
	fHead, fRows, _ := splitReport(fresh)
	pHead, pRows, pTail := splitReport(prev)
	if !partial || pRows == nil {
		return fHead + tableHeader + "\n|---|---|---|---|---|---|---|---|\n" + strings.Join(fRows, "") + pTail
	}
	byKey := map[string]string{}
	for _, r := range fRows {
		byKey[rowKey(r)] = r
	}
	var out []string
	kept := map[string]bool{}
	for _, r := range pRows {
		k := rowKey(r)
		if (known != nil && !known[k]) || kept[k] {
			continue
		}
		kept[k] = true
		if n, ok := byKey[k]; ok {
			out = append(out, n)
			delete(byKey, k)
			continue
		}
		out = append(out, r)
	}
	for _, r := range fRows {
		if _, ok := byKey[rowKey(r)]; ok {
			out = append(out, r)
		}
	}
	// A later run of the same selection replaces its earlier note.
	prefix := fmt.Sprintf("Rows matching `-only '%s'`", only)
	var headLines []string
	for _, l := range strings.SplitAfter(pHead, "\n") {
		if !strings.HasPrefix(l, prefix) {
			headLines = append(headLines, l)
		}
	}
	pHead = strings.Replace(strings.Join(headLines, ""), "\n\n\n", "\n\n", -1)
	// Rows measured on another machine than the full run's say which: a
	// shared box is not always the same model, and ratios move with it.
	if m := machine(fHead); m != "" && m != machine(pHead) {
		extra = strings.TrimSuffix("on "+m+", "+extra, ", ")
	}
	if extra != "" {
		extra = ", " + extra
	}
	note := fmt.Sprintf("Rows matching `-only '%s'` re-measured on %s (`go run ./tools/benchreport -only '%s'`%s); the others are from the run above.\n\n",
		only, time.Now().UTC().Format("2006-01-02 15:04 MST"), only, extra)
	return pHead + note + tableHeader + "\n|---|---|---|---|---|---|---|---|\n" + strings.Join(out, "") + pTail
}

// machine is the "- Machine:" line's machine of a report's head (its CPU
// model, count and platform, before the note after ";"), or "".
func machine(head string) string {
	for _, l := range strings.Split(head, "\n") {
		if m, ok := strings.CutPrefix(l, "- Machine: "); ok {
			m, _, _ = strings.Cut(m, ";")
			return strings.TrimSpace(m)
		}
	}
	return ""
}
