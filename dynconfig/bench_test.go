package dynconfig

import (
	"fmt"
	"testing"
)

// benchEntries is a table of n per-destination overrides across a few keys.
func benchEntries(n int) []Entry {
	entries := []Entry{
		ent(KeyBreakerSettings, "", "", `{"Timeout":"30s"}`),
		ent(KeyOutboundTaskBatchSize, "", "", `200`),
	}
	for i := range n {
		ns, dest := fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("dest-%d", i)
		switch i % 4 {
		case 0:
			entries = append(entries, ent(KeyBreakerSettings, ns, dest, `{"MaxRequests":2,"FailureThreshold":3}`))
		case 1:
			entries = append(entries, ent(KeyBreakerHintPolicy, "", dest, `"adopt"`))
		case 2:
			entries = append(entries, ent(KeyGroupLimiterConcurrency, ns, dest, `50`))
		case 3:
			entries = append(entries, ent(KeyNexusRequestTimeout, ns, dest, `"3s"`))
		}
	}
	return entries
}

func BenchmarkBreakerSettings(b *testing.B) {
	s := mustSnapshot(b, benchEntries(1000)...)
	b.ReportAllocs()
	for b.Loop() {
		_ = s.BreakerSettings("ns-3", "dest-4")
	}
}

func BenchmarkLookup(b *testing.B) {
	s := mustSnapshot(b, benchEntries(1000)...)
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = s.Lookup(KeyGroupLimiterConcurrency, "ns-2", "dest-9")
	}
}

func BenchmarkValidateSettings(b *testing.B) {
	e := ent(KeyBreakerSettings, "ns", "dest", `{"MaxRequests":2,"Interval":"10s","Timeout":"30s","FailureRate":0.5,"MinRequests":10}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := Validate(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewSnapshot1000(b *testing.B) {
	entries := benchEntries(1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewSnapshot(entries); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCollectionUpdateUnchanged1000(b *testing.B) {
	c := NewCollection(nil)
	defer c.Close()
	// The store keeps canonical values, so an unchanged table reuses every
	// decoded value.
	entries := mustSnapshot(b, benchEntries(1000)...).Entries()
	c.Update(entries)
	b.ReportAllocs()
	for b.Loop() {
		c.Update(entries)
	}
}
