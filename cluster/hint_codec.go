package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Wire limits of a hint. A hint travels in one UDP packet together with
// memberlist's framing, CRC, label and AES-GCM overhead, so it stays well
// under the ~1350 bytes a packet can carry when encrypted.
const (
	MaxHintSize     = 1024
	MaxHintOpenFor  = 24 * time.Hour
	maxKeyFieldLen  = 256
	maxReasonLen    = 256
	hintCodecV1     = 1 // states 0-2
	hintCodecV2     = 2 // v1's layout; state 3 (failing) allowed
	hintCodecV3     = 3 // v1's layout (states 0-2) then tagged extensions
	hintFlagSuspect = 1 << 0
	hintFlagsKnown  = hintFlagSuspect
)

// Extension tags of codec v3. Each extension is uvarint(tag) uvarint(len)
// then len bytes; a decoder skips tags it does not know, so later fields can
// be added without another version.
const (
	hintExtRetryUntil = 1 // uvarint(unix ms) of Hint.RetryUntil
	// maxRetryUntilMs is 9999-12-31T23:59:59.999Z: no real deadline is later,
	// and it keeps time.UnixMilli far from overflow.
	maxRetryUntilMs = 253402300799999
)

// ErrHintTooLarge is returned (wrapped) when a hint encodes to more than
// MaxHintSize bytes.
var ErrHintTooLarge = errors.New("hint too large")

// Validate reports the first field of h that cannot be sent.
func (h Hint) Validate() error {
	if err := checkString("Origin", h.Origin, maxNodeIDLen); err != nil {
		return err
	}
	if h.Origin == "" {
		return errors.New("hint: Origin is empty")
	}
	if err := checkString("Key.TaskGroup", h.Key.TaskGroup, maxKeyFieldLen); err != nil {
		return err
	}
	if err := checkString("Key.NamespaceID", h.Key.NamespaceID, maxKeyFieldLen); err != nil {
		return err
	}
	if err := checkString("Key.Destination", h.Key.Destination, maxKeyFieldLen); err != nil {
		return err
	}
	if h.Key.Destination == "" {
		return errors.New("hint: Key.Destination is empty")
	}
	if err := checkString("Reason", h.Reason, maxReasonLen); err != nil {
		return err
	}
	if h.State > HintFailing {
		return fmt.Errorf("hint: State %d out of range 0-3", h.State)
	}
	if h.OpenFor < 0 || h.OpenFor > MaxHintOpenFor {
		return fmt.Errorf("hint: OpenFor %v out of range 0-%v", h.OpenFor, MaxHintOpenFor)
	}
	if h.State == HintFailing && h.OpenFor != 0 {
		return fmt.Errorf("hint: OpenFor %v on a failing hint, want 0", h.OpenFor)
	}
	if !h.RetryUntil.IsZero() {
		if h.State != HintOpen {
			return fmt.Errorf("hint: RetryUntil on a hint in state %d, want %d (open)", h.State, HintOpen)
		}
		if ms := h.RetryUntil.UnixMilli(); ms <= 0 || ms > maxRetryUntilMs {
			return fmt.Errorf("hint: RetryUntil %v out of range", h.RetryUntil)
		}
	}
	return nil
}

func checkString(field, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("hint: %s is %d bytes, max %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("hint: %s is not valid UTF-8", field)
	}
	return nil
}

// EncodeHint returns the versioned binary form of h:
//
//	version(1) state(1) flags(1) uvarint(generation) uvarint(openFor ns)
//	then origin, task group, namespace, destination, reason, each as
//	uvarint(len) bytes.
//
// Version 1 carries states 0-2 (closed, half-open, open); version 2 has the
// same layout and also state 3 (failing). Only failing hints are written as
// v2, so every other hint stays byte-identical to what nodes without the
// early warning send and accept; such nodes drop v2 hints as invalid.
// Version 3 is v1 (open state only, as written) followed by tagged
// extensions, each uvarint(tag) uvarint(len) value: tag 1 is RetryUntil as
// uvarint(unix ms). Only hints with a RetryUntil are written as v3; older
// nodes drop them as invalid (and keep working on their own trips).
func EncodeHint(h Hint) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 3+2*binary.MaxVarintLen64+5*2+len(h.Origin)+
		len(h.Key.TaskGroup)+len(h.Key.NamespaceID)+len(h.Key.Destination)+len(h.Reason))
	var flags byte
	if h.Suspect {
		flags |= hintFlagSuspect
	}
	version := byte(hintCodecV1)
	switch {
	case h.State == HintFailing:
		version = hintCodecV2
	case !h.RetryUntil.IsZero():
		version = hintCodecV3
	}
	buf = append(buf, version, h.State, flags)
	buf = binary.AppendUvarint(buf, h.Generation)
	buf = binary.AppendUvarint(buf, uint64(h.OpenFor))
	for _, s := range [...]string{h.Origin, h.Key.TaskGroup, h.Key.NamespaceID, h.Key.Destination, h.Reason} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	if version == hintCodecV3 {
		ms := uint64(h.RetryUntil.UnixMilli())
		buf = binary.AppendUvarint(buf, hintExtRetryUntil)
		buf = binary.AppendUvarint(buf, uint64(uvarintLen(ms)))
		buf = binary.AppendUvarint(buf, ms)
	}
	if len(buf) > MaxHintSize {
		return nil, fmt.Errorf("hint: Key and Reason encode to %d bytes, max %d: %w", len(buf), MaxHintSize, ErrHintTooLarge)
	}
	return buf, nil
}

// DecodeHint parses and validates an encoded hint. Every field is checked;
// trailing bytes are an error.
func DecodeHint(b []byte) (Hint, error) {
	var h Hint
	if len(b) > MaxHintSize {
		return h, fmt.Errorf("hint: %d bytes, max %d: %w", len(b), MaxHintSize, ErrHintTooLarge)
	}
	if len(b) < 3 {
		return h, errors.New("hint: truncated header")
	}
	h.State = b[1]
	switch {
	case b[0] == hintCodecV1 && h.State > HintOpen:
		return Hint{}, fmt.Errorf("hint: State %d out of range 0-2 for codec v1", h.State)
	case b[0] == hintCodecV2 && h.State != HintFailing:
		// v2 is written for failing hints only; anything else in v2 would
		// not survive a re-encode unchanged.
		return Hint{}, fmt.Errorf("hint: State %d in codec v2, want %d (failing)", h.State, HintFailing)
	case b[0] == hintCodecV3 && h.State > HintOpen:
		return Hint{}, fmt.Errorf("hint: State %d out of range 0-2 for codec v3", h.State)
	case b[0] != hintCodecV1 && b[0] != hintCodecV2 && b[0] != hintCodecV3:
		return Hint{}, fmt.Errorf("hint: unknown codec version %d", b[0])
	}
	flags := b[2]
	if flags&^hintFlagsKnown != 0 {
		return h, fmt.Errorf("hint: unknown flags %#x", flags)
	}
	h.Suspect = flags&hintFlagSuspect != 0
	r := reader{b: b[3:]}
	h.Generation = r.uvarint("Generation")
	openFor := r.uvarint("OpenFor")
	if openFor > uint64(MaxHintOpenFor) {
		return Hint{}, fmt.Errorf("hint: OpenFor %dns exceeds %v", openFor, MaxHintOpenFor)
	}
	h.OpenFor = time.Duration(openFor)
	h.Origin = r.str("Origin", maxNodeIDLen)
	h.Key.TaskGroup = r.str("Key.TaskGroup", maxKeyFieldLen)
	h.Key.NamespaceID = r.str("Key.NamespaceID", maxKeyFieldLen)
	h.Key.Destination = r.str("Key.Destination", maxKeyFieldLen)
	h.Reason = r.str("Reason", maxReasonLen)
	if b[0] == hintCodecV3 {
		r.extensions(&h)
	}
	if r.err != nil {
		return Hint{}, r.err
	}
	if len(r.b) != 0 {
		return Hint{}, fmt.Errorf("hint: %d trailing bytes", len(r.b))
	}
	if err := h.Validate(); err != nil {
		return Hint{}, err
	}
	return h, nil
}

// extensions reads codec v3's tagged fields to the end of the hint,
// skipping unknown tags. A known tag given twice, or whose value does not
// fill its length exactly, is an error.
func (r *reader) extensions(h *Hint) {
	seen := false
	for r.err == nil && len(r.b) > 0 {
		tag := r.uvarint("extension tag")
		n := r.uvarint("extension length")
		if r.err != nil {
			return
		}
		if n > uint64(len(r.b)) {
			r.err = fmt.Errorf("hint: extension %d truncated", tag)
			return
		}
		val := r.b[:n]
		r.b = r.b[n:]
		if tag != hintExtRetryUntil {
			continue // a later field this node does not know
		}
		if seen {
			r.err = errors.New("hint: RetryUntil given twice")
			return
		}
		seen = true
		ms, k := canonicalUvarint(val)
		if k <= 0 || k != len(val) {
			r.err = errors.New("hint: bad RetryUntil")
			return
		}
		if ms == 0 || ms > maxRetryUntilMs {
			r.err = fmt.Errorf("hint: RetryUntil %d ms out of range", ms)
			return
		}
		h.RetryUntil = time.UnixMilli(int64(ms))
	}
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// reader decodes uvarints and length-prefixed strings, keeping the first
// error. A varint must be minimal (as binary.AppendUvarint writes it), so
// that every accepted message has one encoding: 0x80 0x00 is not a
// second way to write 0.
type reader struct {
	b   []byte
	err error
}

// canonicalUvarint is binary.Uvarint, with n ≤ 0 also for a varint longer
// than its value needs.
func canonicalUvarint(b []byte) (v uint64, n int) {
	v, n = binary.Uvarint(b)
	if n > 0 && n != uvarintLen(v) {
		return 0, 0
	}
	return v, n
}

func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := canonicalUvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("hint: bad varint for %s", field)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str(field string, max int) string {
	if r.err != nil {
		return ""
	}
	n, k := canonicalUvarint(r.b)
	if k <= 0 { // as uvarint(field + " length"), without building the name for every string read
		r.err = fmt.Errorf("hint: bad varint for %s length", field)
		return ""
	}
	r.b = r.b[k:]
	if n > uint64(max) {
		r.err = fmt.Errorf("hint: %s is %d bytes, max %d", field, n, max)
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("hint: %s truncated", field)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Batches carry hints in push/pull state: version(1) uvarint(count) then
// count × (uvarint(len) hint).
const (
	hintBatchV1 = 1
	// maxHintBatchBytes bounds LocalState; memberlist accepts far more
	// (20 MiB) but a push/pull runs every PushPullInterval.
	maxHintBatchBytes = 256 << 10
	minEncodedHint    = 3 + 2 + 5
)

// encodeHintBatch encodes hints in order until maxBytes would be exceeded;
// hints that fail to encode are skipped. It returns the batch and how many
// hints it holds.
func encodeHintBatch(hints [][]byte, maxBytes int) ([]byte, int) {
	body := make([]byte, 0, 1024)
	n := 0
	for _, enc := range hints {
		need := binary.MaxVarintLen64 + len(enc)
		if 1+binary.MaxVarintLen64+len(body)+need > maxBytes {
			continue
		}
		body = binary.AppendUvarint(body, uint64(len(enc)))
		body = append(body, enc...)
		n++
	}
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(body))
	out = append(out, hintBatchV1)
	out = binary.AppendUvarint(out, uint64(n))
	return append(out, body...), n
}

// decodeHintBatch splits a batch into its encoded hints (not yet decoded).
func decodeHintBatch(b []byte) ([][]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) > maxHintBatchBytes {
		return nil, fmt.Errorf("hint batch: %d bytes, max %d", len(b), maxHintBatchBytes)
	}
	if b[0] != hintBatchV1 {
		return nil, fmt.Errorf("hint batch: unknown version %d", b[0])
	}
	r := reader{b: b[1:]}
	count := r.uvarint("count")
	if r.err != nil {
		return nil, r.err
	}
	if count > uint64(len(r.b)/minEncodedHint) {
		return nil, fmt.Errorf("hint batch: count %d does not fit %d bytes", count, len(r.b))
	}
	out := make([][]byte, 0, count)
	for i := uint64(0); i < count; i++ {
		n := r.uvarint("hint length")
		if r.err != nil {
			return nil, r.err
		}
		if n > MaxHintSize || n > uint64(len(r.b)) {
			return nil, fmt.Errorf("hint batch: entry %d length %d invalid", i, n)
		}
		out = append(out, r.b[:n])
		r.b = r.b[n:]
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("hint batch: %d trailing bytes", len(r.b))
	}
	return out, nil
}
