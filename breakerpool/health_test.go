package breakerpool

import (
	"testing"
	"time"

	"fusebox/internal/testwait"
)

func TestExtendOpen(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	if b.ExtendOpen(time.Second) {
		t.Fatal("extended a closed breaker")
	}
	wantStatus(t, b, closed, SourceLocal, ModeAuto)

	b.OpenFor(50*time.Millisecond, SourceHint)
	if !b.ExtendOpen(time.Hour) {
		t.Fatal("did not extend an open breaker")
	}
	st := wantStatus(t, b, open, SourceHint, ModeAuto) // source unchanged
	if st.OpenRemaining < 59*time.Minute {
		t.Fatalf("open remaining %v", st.OpenRemaining)
	}
	if !b.ExtendOpen(time.Millisecond) || b.Status().OpenRemaining < 59*time.Minute {
		t.Fatal("shortened")
	}

	// Half-open and operator-forced opens are left alone.
	b2 := p.Get(keyB)
	b2.OpenFor(time.Hour, SourceHint)
	b2.ProbeNow(SourceHealth)
	wantStatus(t, b2, half, SourceHealth, ModeAuto)
	if b2.ExtendOpen(time.Hour) {
		t.Fatal("extended a half-open breaker")
	}
	wantStatus(t, b2, half, SourceHealth, ModeAuto)
	b3 := p.Get(Key{TaskGroup: "g", NamespaceID: "ns", Destination: "forced"})
	b3.OpenFor(time.Minute, SourceOperator)
	if b3.ExtendOpen(time.Hour) || b3.Status().OpenRemaining > time.Minute {
		t.Fatal("extended an operator's open")
	}
}

func TestSettleHalfOpen(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})

	// Healthy: a half-open breaker nobody called closes.
	b := p.Get(keyA)
	b.OpenFor(time.Hour, SourceHint)
	b.ProbeNow(SourceHealth)
	gen := b.Generation()
	if b.SettleHalfOpen(gen-1, true, 0) {
		t.Fatal("settled at a stale generation")
	}
	if !b.SettleHalfOpen(gen, true, 0) {
		t.Fatal("did not settle")
	}
	wantStatus(t, b, closed, SourceLocal, ModeAuto)
	if b.SettleHalfOpen(b.Generation(), false, time.Second) {
		t.Fatal("settled a closed breaker")
	}
	mustCall(t, b, true)

	// Unhealthy: it reopens for the given period; a probe admitted before
	// resolves into the old epoch and is ignored.
	b2 := p.Get(keyB)
	b2.OpenFor(time.Hour, SourceHint)
	b2.ProbeNow(SourceHealth)
	done, err := b2.Allow()
	if err != nil {
		t.Fatal(err)
	}
	if !b2.SettleHalfOpen(b2.Generation(), false, time.Minute) {
		t.Fatal("did not settle")
	}
	st := wantStatus(t, b2, open, SourceLocal, ModeAuto)
	if st.OpenRemaining < 50*time.Second || st.OpenRemaining > time.Minute {
		t.Fatalf("open remaining %v", st.OpenRemaining)
	}
	done(true)
	wantStatus(t, b2, open, SourceLocal, ModeAuto)

	// The settles are marked as decided by a check; the half-opens before
	// them (a check's pass, handing the breaker a task) and a real probe's
	// failure are not.
	testwait.For(t, 5*time.Second, "the settles observed", func() bool { return len(p.rec.all()) >= 6 })
	for _, tr := range p.rec.all() {
		settle := tr.From == half && tr.Source == SourceLocal
		if tr.ByCheck != settle {
			t.Errorf("transition %v → %v (%s) ByCheck %v, want %v", tr.From, tr.To, tr.Source, tr.ByCheck, settle)
		}
	}
	b3 := p.Get(Key{TaskGroup: "g", NamespaceID: "ns", Destination: "probe"})
	b3.OpenFor(time.Hour, SourceHint)
	b3.ProbeNow(SourceHealth)
	mustCall(t, b3, false)
	testwait.For(t, 5*time.Second, "the failed probe observed", func() bool { return len(p.rec.all()) >= 9 })
	if last := p.rec.all()[8]; last.From != half || last.To != open || last.ByCheck {
		t.Errorf("a real probe's failure %+v, want half-open → open without ByCheck", last)
	}
}

// FailedCheck is a failed probe without a call: open → half-open → open
// under one lock (nothing admitted between), observed as both transitions,
// the second of source local as a real probe's; a closed or operator-forced
// breaker is left alone.
func TestFailedCheck(t *testing.T) {
	p := newTestPool(t, fastSettings(), Config{})
	b := p.Get(keyA)
	if b.FailedCheck(0) {
		t.Fatal("a closed breaker was failed")
	}
	b.OpenFor(time.Hour, SourceHint)
	testwait.For(t, 5*time.Second, "the opening observed", func() bool { return len(p.rec.all()) == 1 })
	before := 1
	if !b.FailedCheck(time.Minute) {
		t.Fatal("an open breaker was not failed")
	}
	st := wantStatus(t, b, open, SourceLocal, ModeAuto)
	if st.OpenRemaining < 50*time.Second || st.OpenRemaining > time.Minute {
		t.Fatalf("open remaining %v, want the minute asked for", st.OpenRemaining)
	}
	testwait.For(t, 5*time.Second, "the two transitions observed", func() bool { return len(p.rec.all()) >= before+2 })
	got := p.rec.all()[before:]
	if got[0].From != open || got[0].To != half || got[1].From != half || got[1].To != open || got[1].Source != SourceLocal {
		t.Fatalf("transitions %+v, want open→half-open→open (local)", got)
	}
	if !got[0].ByCheck || !got[1].ByCheck {
		t.Fatalf("transitions %+v, want both marked ByCheck: no call was made", got)
	}
	if _, err := b.Allow(); err == nil {
		t.Fatal("a call was admitted after a failed check")
	}

	f := p.Get(keyB)
	f.OpenFor(time.Hour, SourceOperator)
	if f.FailedCheck(0) {
		t.Fatal("an operator-forced breaker was failed")
	}
}
