package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"fusebox/breakerpool"
)

func sampleHint() Hint {
	return Hint{
		Key:        breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns-1", Destination: "payments"},
		State:      HintOpen,
		Generation: 42,
		Origin:     "node-a",
		OpenFor:    37 * time.Second,
		Reason:     "6 consecutive failures: 503",
		Suspect:    true,
	}
}

func TestHintRoundTrip(t *testing.T) {
	for _, h := range []Hint{sampleHint(), {Key: breakerpool.Key{Destination: "d"}, Origin: "o"}} {
		b, err := EncodeHint(h)
		if err != nil {
			t.Fatalf("EncodeHint: %v", err)
		}
		got, err := DecodeHint(b)
		if err != nil {
			t.Fatalf("DecodeHint: %v", err)
		}
		if diff := cmp.Diff(h, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestEncodeHintRejects(t *testing.T) {
	long := strings.Repeat("x", 300)
	cases := []struct {
		name  string
		mod   func(*Hint)
		field string
	}{
		{"empty origin", func(h *Hint) { h.Origin = "" }, "Origin"},
		{"long origin", func(h *Hint) { h.Origin = long }, "Origin"},
		{"empty destination", func(h *Hint) { h.Key.Destination = "" }, "Key.Destination"},
		{"long destination", func(h *Hint) { h.Key.Destination = long }, "Key.Destination"},
		{"long task group", func(h *Hint) { h.Key.TaskGroup = long }, "Key.TaskGroup"},
		{"long namespace", func(h *Hint) { h.Key.NamespaceID = long }, "Key.NamespaceID"},
		{"long reason", func(h *Hint) { h.Reason = long }, "Reason"},
		{"bad utf8", func(h *Hint) { h.Reason = "\xff" }, "Reason"},
		{"state", func(h *Hint) { h.State = 4 }, "State"},
		{"failing with open time", func(h *Hint) { h.State = HintFailing }, "OpenFor"},
		{"negative open", func(h *Hint) { h.OpenFor = -time.Second }, "OpenFor"},
		{"huge open", func(h *Hint) { h.OpenFor = 25 * time.Hour }, "OpenFor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := sampleHint()
			c.mod(&h)
			_, err := EncodeHint(h)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("EncodeHint error = %v, want one naming %s", err, c.field)
			}
		})
	}
	t.Run("total size", func(t *testing.T) {
		h := sampleHint()
		h.Key = breakerpool.Key{TaskGroup: strings.Repeat("t", 250), NamespaceID: strings.Repeat("n", 250), Destination: strings.Repeat("d", 250)}
		h.Reason = strings.Repeat("r", 250)
		h.Origin = strings.Repeat("o", 120)
		_, err := EncodeHint(h)
		if !errors.Is(err, ErrHintTooLarge) || !strings.Contains(err.Error(), "Key and Reason") {
			t.Fatalf("err = %v, want ErrHintTooLarge naming Key and Reason", err)
		}
	})
}

func TestDecodeHintRejects(t *testing.T) {
	good, err := EncodeHint(sampleHint())
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string][]byte{
		"empty":         nil,
		"short":         {1, 2},
		"version":       mut(func(b []byte) []byte { b[0] = 9; return b }),
		"state":         mut(func(b []byte) []byte { b[1] = 4; return b }),
		"v1 failing":    mut(func(b []byte) []byte { b[1] = 3; return b }),
		"flags":         mut(func(b []byte) []byte { b[2] = 0x80; return b }),
		"trailing":      append(append([]byte(nil), good...), 0),
		"truncated":     good[:len(good)-3],
		"oversize":      make([]byte, MaxHintSize+1),
		"bad varint":    {1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"openFor > 24h": append([]byte{1, 2, 0, 1}, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
		// The same Generation in two bytes: a second encoding of one hint.
		"non-minimal varint": mut(func(b []byte) []byte {
			return append(append(append([]byte(nil), b[:3]...), b[3]|0x80, 0), b[4:]...)
		}),
	}
	if good[3] >= 0x80 {
		t.Fatalf("sampleHint's Generation takes %#x: the non-minimal case needs a one-byte one", good[3])
	}
	for name, b := range cases {
		if _, err := DecodeHint(b); err == nil {
			t.Errorf("%s: DecodeHint accepted %x", name, b)
		}
	}
}

func TestHintBatch(t *testing.T) {
	var encs [][]byte
	for i := range 5 {
		h := sampleHint()
		h.Generation = uint64(i)
		b, err := EncodeHint(h)
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, b)
	}
	batch, n := encodeHintBatch(encs, maxHintBatchBytes)
	if n != 5 {
		t.Fatalf("batch holds %d, want 5", n)
	}
	got, err := decodeHintBatch(batch)
	if err != nil || len(got) != 5 {
		t.Fatalf("decodeHintBatch = %d, %v", len(got), err)
	}
	for i := range got {
		if string(got[i]) != string(encs[i]) {
			t.Errorf("entry %d differs", i)
		}
	}
	// A small budget keeps the first (newest) entries only.
	small, n := encodeHintBatch(encs, 2*len(encs[0])+24)
	if n != 2 {
		t.Errorf("small batch holds %d, want 2", n)
	}
	if got, err := decodeHintBatch(small); err != nil || len(got) != 2 {
		t.Errorf("small batch decodes to %d, %v", len(got), err)
	}
	for name, b := range map[string][]byte{
		"version":  {9, 0},
		"count":    {1, 100, 3, 1, 2, 3},
		"length":   {1, 1, 0x80, 0x10},
		"trailing": append(append([]byte(nil), batch...), 7),
	} {
		if _, err := decodeHintBatch(b); err == nil {
			t.Errorf("%s: decodeHintBatch accepted %x", name, b)
		}
	}
}

func FuzzDecodeHint(f *testing.F) {
	good, _ := EncodeHint(sampleHint())
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 1, 'o', 0, 0, 1, 'd', 0})
	failing := sampleHint()
	failing.State, failing.OpenFor = HintFailing, 0
	encF, _ := EncodeHint(failing)
	f.Add(encF)
	f.Add([]byte{2, 3, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0})
	f.Add([]byte{2, 2, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0}) // v2 carrying a v1 state
	f.Add([]byte{1, 3, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0}) // v1 carrying failing
	// Codec v3 (Retry-After): a real one, then hand-made extensions.
	ra := sampleHint()
	ra.RetryUntil = time.UnixMilli(1_764_601_200_000)
	encRA, _ := EncodeHint(ra)
	f.Add(encRA)
	f.Add([]byte{3, 2, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0, 1, 1, 5})             // RetryUntil 5 ms
	f.Add([]byte{3, 2, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0, 9, 2, 0, 0, 1, 1, 5}) // unknown tag skipped
	f.Add([]byte{3, 2, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0, 1, 1, 5, 1, 1, 6})    // RetryUntil twice
	f.Add([]byte{3, 0, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0, 1, 1, 5})             // on a closed hint
	f.Add([]byte{3, 2, 0, 7, 0, 1, 'o', 0, 0, 1, 'd', 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHint(b)
		if err != nil {
			return
		}
		enc, err := EncodeHint(h)
		if err != nil {
			t.Fatalf("decoded hint does not re-encode: %v (%+v)", err, h)
		}
		h2, err := DecodeHint(enc)
		if err != nil {
			t.Fatalf("re-encoded hint does not decode: %v", err)
		}
		if diff := cmp.Diff(h, h2); diff != "" {
			t.Fatalf("re-encode changed the hint (-first +second):\n%s", diff)
		}
	})
}

// TestHintFailingCodecV2: a failing hint is written as v2 and round-trips;
// every other state is still written as v1, byte for byte what nodes
// without the early warning send, and their encodings still decode.
func TestHintFailingCodecV2(t *testing.T) {
	h := sampleHint()
	h.State, h.OpenFor, h.Reason, h.Suspect = HintFailing, 0, "2 consecutive failures", false
	b, err := EncodeHint(h)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != hintCodecV2 || b[1] != HintFailing {
		t.Fatalf("failing hint header %x, want version 2 state 3", b[:2])
	}
	got, err := DecodeHint(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	// v2 may only carry the failing state.
	bad := append([]byte(nil), b...)
	bad[1] = HintOpen
	if _, err := DecodeHint(bad); err == nil || !strings.Contains(err.Error(), "v2") {
		t.Fatalf("v2 open hint: err = %v", err)
	}

	// A v1 hint as the previous codec wrote it (golden bytes): open,
	// suspect flag, generation 42, OpenFor 37s, origin "node-a", callback
	// task group, namespace "ns-1", destination "payments", reason "x".
	v1 := []byte{1, 2, 1, 42, 0x80, 0xe4, 0xfc, 0xea, 0x89, 0x01,
		6, 'n', 'o', 'd', 'e', '-', 'a'}
	v1 = append(v1, byte(len(breakerpool.TaskGroupCallback)))
	v1 = append(v1, breakerpool.TaskGroupCallback...)
	v1 = append(v1, 4, 'n', 's', '-', '1', 8, 'p', 'a', 'y', 'm', 'e', 'n', 't', 's', 1, 'x')
	old, err := DecodeHint(v1)
	if err != nil {
		t.Fatalf("v1 golden: %v", err)
	}
	want := sampleHint()
	want.Reason = "x"
	if diff := cmp.Diff(want, old); diff != "" {
		t.Fatalf("v1 golden (-want +got):\n%s", diff)
	}
	for _, st := range []uint8{HintClosed, HintHalfOpen, HintOpen} {
		want.State = st
		enc, err := EncodeHint(want)
		if err != nil {
			t.Fatal(err)
		}
		if st == HintOpen && string(enc) != string(v1) {
			t.Fatalf("open hint encodes to %x, want the v1 bytes %x", enc, v1)
		}
		if enc[0] != hintCodecV1 {
			t.Fatalf("state %d written as version %d, want 1", st, enc[0])
		}
	}
}
