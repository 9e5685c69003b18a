package main

import (
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/ui"
)

// TestTripsClassifiesOpenings: each node's flaky openings are counted once
// by origin (its own failures, a failed probe, a failed health check, a
// peer's hint, an operator), the latest is shown with the confirm round
// behind it, other keys and transitions are ignored, and only failed probes
// count as tasks spent probing (a health check's reopening spends none).
func TestTripsClassifiesOpenings(t *testing.T) {
	begin := time.Now()
	at := func(s int) time.Time { return begin.Add(time.Duration(s) * time.Second) }
	tr := newTrips()
	// Newest first, as the merged timeline is.
	first := ui.TransitionList{Transitions: []ui.Transition{
		{Node: "n2", Destination: destFlaky, From: "closed", To: "open", Source: "hint", Seq: 1, At: at(3)},
		{Node: "n1", Destination: destHealthy, From: "closed", To: "open", Source: "local", Seq: 2, At: at(2)},
		{Node: "n1", Destination: destFlaky, From: "closed", To: "open", Source: "local", Seq: 1, At: at(1)},
	}}
	tr.update(first, begin)
	tr.update(first, begin) // seen already: not counted twice
	tr.update(ui.TransitionList{Transitions: []ui.Transition{
		{Node: "n3", Destination: destFlaky, From: "half-open", To: "open", Source: "local", Seq: 2, At: at(9)},
		{Node: "n3", Destination: destFlaky, From: "open", To: "half-open", Source: "local", Seq: 1, At: at(8)},
		// The confirm round answered by a check (healthprobe's FailedCheck).
		{Node: "n4", Destination: destFlaky, From: "half-open", To: "open", Source: "local", ByCheck: true, Seq: 2, At: at(8)},
		{Node: "n4", Destination: destFlaky, From: "open", To: "half-open", Source: "health", ByCheck: true, Seq: 1, At: at(8)},
		{Node: "n1", Destination: destFlaky, From: "half-open", To: "open", Source: "local", Seq: 4, At: at(7)},
		{Node: "n1", Destination: destFlaky, From: "closed", To: "open", Source: "operator", Seq: 3, At: at(6)},
	}}, begin)
	got := tr.view([]breakerView{
		{Node: "n2", Destination: destFlaky, Confirm: &api.BreakerConfirm{Outcome: "confirmed", Accused: "n1", By: "n3"}},
		{Node: "n3", Destination: destFlaky, Confirm: &api.BreakerConfirm{Outcome: "confirmed", Accused: "n1", By: "n3"}},
	})
	if len(got) != 4 {
		t.Fatalf("trips of %d nodes, want 4: %+v", len(got), got)
	}
	n1, n2, n3, n4 := got[0], got[1], got[2], got[3]
	if n1.Origin != originProbe || n1.LastAt != 7*time.Second || n1.Counts[originLocal] != 1 || n1.Counts[originOperator] != 1 || n1.Counts[originProbe] != 1 {
		t.Errorf("n1 %+v; want a local trip, an operator's and a failed probe, the probe latest at t+7s", n1)
	}
	if n2.Origin != originHint || n2.Counts[originHint] != 1 || n2.Detail != "n1 reported, n3 confirmed" {
		t.Errorf("n2 %+v; want one peer hint, n1 reported and n3 confirmed", n2)
	}
	if n3.Origin != originProbe || n3.Detail != "this node checked n1's report: it failed" {
		t.Errorf("n3 %+v; want its probe confirming n1's report", n3)
	}
	if n4.Origin != originCheck || n4.Counts[originCheck] != 1 || n4.Counts[originProbe] != 0 {
		t.Errorf("n4 %+v; want one failed health check and no failed probe", n4)
	}
	if got := tr.probesBetween(0, 10*time.Second); got != 2 {
		t.Errorf("tasks spent probing %d, want 2 (n1's and n3's probes; n4's check spent none)", got)
	}

	var b strings.Builder
	writeTrips(&b, got, outageView{PerNode: map[string]int{"n1": 6, "n2": 0}})
	for _, want := range []string{"WHY EACH NODE STOPPED CALLING flaky", "t+7.0s failed probe", "local  probe  check  hint  operator", "t+8.0s failed check", "t+3.0s peer hint (n1 reported, n3 confirmed)", "calls while down"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("trips section lacks %q:\n%s", want, b.String())
		}
	}
	if line := tripsLine(got); line != "n1:failed-probe n2:peer-hint n3:failed-probe n4:failed-check" {
		t.Errorf("trips line %q", line)
	}
}

func TestCostBars(t *testing.T) {
	m, e := costBars(10, 40, 20)
	if strings.Count(m, "█") != 5 || strings.Count(e, "█") != 20 || len([]rune(m)) != 20 || len([]rune(e)) != 20 {
		t.Errorf("bars %q %q; want 5 and 20 of 20 cells", m, e)
	}
	if m, e := costBars(0, 0, 8); strings.Contains(m+e, "█") {
		t.Errorf("zero bars %q %q", m, e)
	}
}
