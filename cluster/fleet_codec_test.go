package cluster

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"fusebox/breakerpool"
)

func sampleFleetReport() FleetReport {
	return FleetReport{Origin: "n1", Entries: []FleetEntry{
		{Key: breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: "https://a.example"}, Backlog: 800},
		{Key: breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns", Destination: "ep"}, Backlog: 1},
	}}
}

func TestFleetReportRoundTrip(t *testing.T) {
	for _, r := range []FleetReport{sampleFleetReport(), {Origin: "n2"}} {
		enc, err := EncodeFleetReport(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeFleetReport(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip: got %+v, want %+v", got, r)
		}
	}
	// The wire layout is pinned: version, count, origin, entries.
	enc, _ := EncodeFleetReport(FleetReport{Origin: "o", Entries: []FleetEntry{{Key: breakerpool.Key{Destination: "d"}, Backlog: 300}}})
	want := []byte{1, 1, 1, 'o', 0, 0, 1, 'd', 0xac, 0x02}
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoding % x, want % x", enc, want)
	}
}

func TestFleetReportInvalid(t *testing.T) {
	k := breakerpool.Key{Destination: "d"}
	many := make([]FleetEntry, MaxFleetEntries+1)
	for i := range many {
		many[i] = FleetEntry{Key: breakerpool.Key{Destination: fmt.Sprint(i)}, Backlog: 1}
	}
	for name, tc := range map[string]struct {
		r    FleetReport
		want string
	}{
		"no origin":       {FleetReport{}, "Origin is empty"},
		"no destination":  {FleetReport{Origin: "o", Entries: []FleetEntry{{Backlog: 1}}}, "Entries[0].Key.Destination is empty"},
		"zero backlog":    {FleetReport{Origin: "o", Entries: []FleetEntry{{Key: k}}}, "Entries[0].Backlog 0 out of range"},
		"huge backlog":    {FleetReport{Origin: "o", Entries: []FleetEntry{{Key: k, Backlog: MaxFleetBacklog + 1}}}, "Entries[0].Backlog"},
		"duplicate key":   {FleetReport{Origin: "o", Entries: []FleetEntry{{Key: k, Backlog: 1}, {Key: k, Backlog: 2}}}, "Entries[1].Key repeats"},
		"too many":        {FleetReport{Origin: "o", Entries: many}, "65 entries, max 64"},
		"bad utf8":        {FleetReport{Origin: "o", Entries: []FleetEntry{{Key: breakerpool.Key{NamespaceID: "\xff", Destination: "d"}, Backlog: 1}}}, "Entries[0].Key.NamespaceID is not valid UTF-8"},
		"origin too long": {FleetReport{Origin: strings.Repeat("o", maxNodeIDLen+1)}, "Origin is 129 bytes"},
	} {
		if _, err := EncodeFleetReport(tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
	for name, b := range map[string][]byte{
		"empty":         {},
		"version":       {2, 0, 1, 'o'},
		"trailing":      {1, 0, 1, 'o', 0},
		"truncated":     {1, 1, 1, 'o', 0, 0, 1},
		"count too big": {1, 65, 1, 'o'},
		"zero backlog":  {1, 1, 1, 'o', 0, 0, 1, 'd', 0},
		// A varint longer than its value needs: a second encoding of one
		// report (found by FuzzDecodeFleetReport).
		"non-minimal count":  {1, 0x80, 0x00, 1, '0'},
		"non-minimal length": {1, 0, 0x81, 0x00, 'o'},
	} {
		if _, err := DecodeFleetReport(b); err == nil {
			t.Errorf("%s: decoded % x", name, b)
		}
	}
}

func TestSplitFleetReport(t *testing.T) {
	var entries []FleetEntry
	for i := range 200 {
		entries = append(entries, FleetEntry{Key: breakerpool.Key{TaskGroup: "callbacks.Invocation", NamespaceID: "ns",
			Destination: fmt.Sprintf("https://host-%03d.example.com", i)}, Backlog: int64(1000 - i)})
	}
	entries = append(entries, FleetEntry{Key: breakerpool.Key{Destination: strings.Repeat("x", 300)}, Backlog: 1}) // cannot encode: skipped
	msgs := splitFleetReport("n1", entries)
	var got []FleetEntry
	for _, m := range msgs {
		if m[0] != msgFleet || len(m) > MaxFleetReportSize+1 {
			t.Fatalf("message of %d bytes, family %d", len(m), m[0])
		}
		r, err := DecodeFleetReport(m[1:])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Entries...)
	}
	if !reflect.DeepEqual(got, entries[:200]) {
		t.Fatalf("split lost or reordered entries: %d of 200 in %d messages", len(got), len(msgs))
	}
	if hb := splitFleetReport("n1", nil); len(hb) != 1 || !bytes.Equal(hb[0], []byte{msgFleet, 1, 0, 2, 'n', '1'}) {
		t.Fatalf("heartbeat % x", hb)
	}
}

// FuzzDecodeFleetReport: decoding never panics, and decode∘encode is the
// identity on accepted input.
func FuzzDecodeFleetReport(f *testing.F) {
	good, _ := EncodeFleetReport(sampleFleetReport())
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 1, 'o'})
	f.Add([]byte{1, 1, 1, 'o', 0, 0, 1, 'd', 0xac, 0x02})
	f.Add([]byte{1, 2, 1, 'o', 0, 0, 1, 'd', 1, 0, 0, 1, 'd', 2})
	f.Add([]byte{1, 1, 1, 'o', 0, 0, 1, 'd', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{1, 0x80, 0x00, 1, '0'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeFleetReport(b)
		if err != nil {
			return
		}
		enc, err := EncodeFleetReport(r)
		if err != nil {
			t.Fatalf("accepted % x but cannot re-encode: %v", b, err)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("re-encoding differs: % x vs % x", enc, b)
		}
	})
}
