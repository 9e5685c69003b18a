package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"fusebox/breakerpool"
)

// A fleet report (user message family msgFleet) is one node's backlog per
// budgeted key (issue 19 §3, DESIGN.md "Fleet rate budget"). Each node
// sends one every FleetInterval directly to every live peer; a report too
// big for one packet is split in several, each a complete message.
//
// Wire, version 1:
//
//	version(1) uvarint(count) then origin as uvarint(len) bytes, then count
//	× (task group, namespace, destination each as uvarint(len) bytes,
//	uvarint(backlog))
//
// Limits: at most MaxFleetReportSize bytes and MaxFleetEntries entries,
// origin non-empty (≤128 bytes), destination non-empty, strings UTF-8 ≤256
// bytes, backlog in 1…MaxFleetBacklog, no key twice, no trailing bytes.
const (
	fleetCodecV1 = 1
	// MaxFleetReportSize keeps one report in one UDP packet with
	// memberlist's framing and encryption overhead.
	MaxFleetReportSize = 1200
	// MaxFleetEntries bounds the entries of one message.
	MaxFleetEntries = 64
	// MaxFleetBacklog bounds one entry's backlog (a sanity bound, far above
	// any real one).
	MaxFleetBacklog = 1 << 40
)

// FleetEntry is one key's backlog on the reporting node.
type FleetEntry struct {
	Key     breakerpool.Key
	Backlog int64
}

// FleetReport is one message of a node's backlog report.
type FleetReport struct {
	Origin  string
	Entries []FleetEntry
}

// Validate reports the first field of r that cannot be sent.
func (r FleetReport) Validate() error {
	if err := checkFleetString("Origin", r.Origin, maxNodeIDLen); err != nil {
		return err
	}
	if r.Origin == "" {
		return errors.New("fleet report: Origin is empty")
	}
	if len(r.Entries) > MaxFleetEntries {
		return fmt.Errorf("fleet report: %d entries, max %d", len(r.Entries), MaxFleetEntries)
	}
	seen := make(map[breakerpool.Key]struct{}, len(r.Entries))
	for i, e := range r.Entries {
		if err := e.validate(i); err != nil {
			return err
		}
		if _, dup := seen[e.Key]; dup {
			return fmt.Errorf("fleet report: Entries[%d].Key repeats an earlier entry", i)
		}
		seen[e.Key] = struct{}{}
	}
	return nil
}

// validate reports the first bad field of entry i.
func (e FleetEntry) validate(i int) error {
	for _, f := range [...]struct{ name, v string }{
		{"TaskGroup", e.Key.TaskGroup}, {"NamespaceID", e.Key.NamespaceID}, {"Destination", e.Key.Destination},
	} {
		if err := checkFleetString(fmt.Sprintf("Entries[%d].Key.%s", i, f.name), f.v, maxKeyFieldLen); err != nil {
			return err
		}
	}
	if e.Key.Destination == "" {
		return fmt.Errorf("fleet report: Entries[%d].Key.Destination is empty", i)
	}
	if e.Backlog < 1 || e.Backlog > MaxFleetBacklog {
		return fmt.Errorf("fleet report: Entries[%d].Backlog %d out of range 1-%d", i, e.Backlog, int64(MaxFleetBacklog))
	}
	return nil
}

func checkFleetString(field, s string, max int) error {
	if err := checkString(field, s, max); err != nil {
		return fleetErr(err)
	}
	return nil
}

// fleetErr rewords an error of the shared hint helpers (checkString,
// reader) for a fleet report.
func fleetErr(err error) error {
	return errors.New("fleet report: " + strings.TrimPrefix(err.Error(), "hint: "))
}

// fleetEntrySize is e's encoded size.
func fleetEntrySize(e FleetEntry) int {
	n := uvarintLen(uint64(e.Backlog))
	for _, s := range [...]string{e.Key.TaskGroup, e.Key.NamespaceID, e.Key.Destination} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	return n
}

// EncodeFleetReport returns r's wire form (without the family byte).
func EncodeFleetReport(r FleetReport) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 256)
	buf = append(buf, fleetCodecV1)
	buf = binary.AppendUvarint(buf, uint64(len(r.Entries)))
	buf = binary.AppendUvarint(buf, uint64(len(r.Origin)))
	buf = append(buf, r.Origin...)
	for _, e := range r.Entries {
		for _, s := range [...]string{e.Key.TaskGroup, e.Key.NamespaceID, e.Key.Destination} {
			buf = binary.AppendUvarint(buf, uint64(len(s)))
			buf = append(buf, s...)
		}
		buf = binary.AppendUvarint(buf, uint64(e.Backlog))
	}
	if len(buf) > MaxFleetReportSize {
		return nil, fmt.Errorf("fleet report: encodes to %d bytes, max %d", len(buf), MaxFleetReportSize)
	}
	return buf, nil
}

// DecodeFleetReport parses and validates one encoded report; any error
// drops the whole message.
func DecodeFleetReport(b []byte) (FleetReport, error) {
	var r FleetReport
	if len(b) > MaxFleetReportSize {
		return r, fmt.Errorf("fleet report: %d bytes, max %d", len(b), MaxFleetReportSize)
	}
	if len(b) < 1 {
		return r, errors.New("fleet report: empty")
	}
	if b[0] != fleetCodecV1 {
		return r, fmt.Errorf("fleet report: unknown codec version %d", b[0])
	}
	rd := reader{b: b[1:]}
	count := rd.uvarint("count")
	if rd.err == nil && count > MaxFleetEntries {
		return r, fmt.Errorf("fleet report: %d entries, max %d", count, MaxFleetEntries)
	}
	r.Origin = rd.str("Origin", maxNodeIDLen)
	if rd.err == nil && count > 0 {
		r.Entries = make([]FleetEntry, 0, count)
	}
	for i := uint64(0); i < count && rd.err == nil; i++ {
		var e FleetEntry
		e.Key.TaskGroup = rd.str("Key.TaskGroup", maxKeyFieldLen)
		e.Key.NamespaceID = rd.str("Key.NamespaceID", maxKeyFieldLen)
		e.Key.Destination = rd.str("Key.Destination", maxKeyFieldLen)
		v := rd.uvarint("Backlog")
		if rd.err == nil && v > MaxFleetBacklog {
			return FleetReport{}, fmt.Errorf("fleet report: Entries[%d].Backlog %d exceeds %d", i, v, int64(MaxFleetBacklog))
		}
		e.Backlog = int64(v)
		r.Entries = append(r.Entries, e)
	}
	if rd.err != nil {
		return FleetReport{}, fleetErr(rd.err)
	}
	if len(rd.b) != 0 {
		return FleetReport{}, fmt.Errorf("fleet report: %d trailing bytes", len(rd.b))
	}
	if err := r.Validate(); err != nil {
		return FleetReport{}, err
	}
	return r, nil
}

// splitFleetReport encodes entries (in order) into as few messages as fit
// MaxFleetReportSize and MaxFleetEntries, each with the family byte; an
// invalid entry, or one too big for a message alone, is skipped (the
// caller deduplicates keys). No entries gives one
// empty message (the heartbeat that says "no backlog here").
func splitFleetReport(origin string, entries []FleetEntry) [][]byte {
	header := 1 + uvarintLen(MaxFleetEntries) + uvarintLen(uint64(len(origin))) + len(origin)
	var (
		msgs [][]byte
		cur  []FleetEntry
		size = header
	)
	flush := func() {
		enc, err := EncodeFleetReport(FleetReport{Origin: origin, Entries: cur})
		if err == nil {
			msgs = append(msgs, append([]byte{msgFleet}, enc...))
		}
		cur, size = nil, header
	}
	for _, e := range entries {
		n := fleetEntrySize(e)
		if e.validate(0) != nil || header+n > MaxFleetReportSize {
			continue
		}
		if len(cur) == MaxFleetEntries || size+n > MaxFleetReportSize {
			flush()
		}
		cur = append(cur, e)
		size += n
	}
	if len(cur) > 0 || len(msgs) == 0 {
		flush()
	}
	return msgs
}
