package cluster

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// raHint is sampleHint carrying a Retry-After deadline (ms precision, as
// on the wire).
func raHint() Hint {
	h := sampleHint()
	h.RetryUntil = time.UnixMilli(1_764_601_200_123)
	return h
}

// TestHintRetryUntilCodecV3: a hint with RetryUntil is written as v3 and
// round-trips; without one nothing changes (v1, golden bytes in
// TestHintFailingCodecV2).
func TestHintRetryUntilCodecV3(t *testing.T) {
	h := raHint()
	b, err := EncodeHint(h)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != hintCodecV3 {
		t.Fatalf("version %d, want 3", b[0])
	}
	got, err := DecodeHint(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	// Its v1 prefix is exactly the hint without the deadline.
	plain := sampleHint()
	v1, _ := EncodeHint(plain)
	if string(b[1:len(v1)]) != string(v1[1:]) {
		t.Fatalf("v3 prefix %x differs from v1 %x", b[:len(v1)], v1)
	}
	// An unknown extension after it is skipped (forward compatibility).
	ext := append(append([]byte(nil), b...), 9, 3, 'a', 'b', 'c')
	if got, err := DecodeHint(ext); err != nil || !got.RetryUntil.Equal(h.RetryUntil) {
		t.Fatalf("unknown extension: %+v, %v", got, err)
	}
}

func TestHintRetryUntilRejects(t *testing.T) {
	for name, mod := range map[string]func(*Hint){
		"closed":     func(h *Hint) { h.State = HintClosed },
		"half-open":  func(h *Hint) { h.State = HintHalfOpen },
		"before1970": func(h *Hint) { h.RetryUntil = time.Unix(-5, 0) },
		"year 10000": func(h *Hint) { h.RetryUntil = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		h := raHint()
		mod(&h)
		if _, err := EncodeHint(h); err == nil || !strings.Contains(err.Error(), "RetryUntil") {
			t.Errorf("%s: EncodeHint error = %v, want one naming RetryUntil", name, err)
		}
	}
	good, err := EncodeHint(sampleHint())
	if err != nil {
		t.Fatal(err)
	}
	v3 := func(state byte, ext ...byte) []byte {
		b := append([]byte(nil), good...)
		b[0], b[1] = hintCodecV3, state
		return append(b, ext...)
	}
	huge := binary.AppendUvarint(nil, maxRetryUntilMs+1)
	cases := map[string][]byte{
		"twice":           v3(HintOpen, 1, 1, 5, 1, 1, 6),
		"zero":            v3(HintOpen, 1, 1, 0),
		"beyond 9999":     v3(HintOpen, append([]byte{1, byte(len(huge))}, huge...)...),
		"short value":     v3(HintOpen, 1, 2, 5),
		"long value":      v3(HintOpen, 1, 2, 5, 0),
		"truncated len":   v3(HintOpen, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 5),
		"truncated tag":   v3(HintOpen, 0x80),
		"value varint":    v3(HintOpen, 1, 1, 0x80),
		"on closed":       v3(HintClosed, 1, 1, 5),
		"failing":         v3(HintFailing, 1, 1, 5),
		"unknown trunc":   v3(HintOpen, 9, 4, 'a'),
		"oversize in ext": append(v3(HintOpen, 9, 0xf0, 0x07), make([]byte, MaxHintSize)...),
	}
	for name, b := range cases {
		if _, err := DecodeHint(b); err == nil {
			t.Errorf("%s: DecodeHint accepted %x", name, b)
		}
	}
}
