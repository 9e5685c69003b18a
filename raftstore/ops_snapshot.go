package raftstore

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"fusebox/raftstore/state"
)

// A snapshot file (fusebox admin snapshot save) is one JSON header line,
// then the payload: the FSM's own snapshot stream (snapshot.go), exactly as
// raft stored it. The header carries the file format version, the raft
// index and term the snapshot was taken at, the fusebox version that wrote
// it and a SHA-256 over the payload; ReadSnapshotFile refuses a file whose
// header, size or checksum does not hold.
const (
	SnapshotFileFormat  = "fusebox-snapshot"
	SnapshotFileVersion = 1
	// MaxSnapshotHeader bounds the header line.
	MaxSnapshotHeader = 64 << 10
)

// SnapshotFileHeader is the first line of a snapshot file.
type SnapshotFileHeader struct {
	Format         string    `json:"format"`
	Version        int       `json:"version"`
	StateVersion   int       `json:"state_version"` // version of the payload's stream
	Index          uint64    `json:"raft_index"`
	Term           uint64    `json:"raft_term"`
	FuseboxVersion string    `json:"build_version"`
	ClusterID      string    `json:"cluster_id,omitempty"`
	Node           string    `json:"node"` // the leader that took it
	CreatedAt      time.Time `json:"created_at"`
	PayloadSize    int64     `json:"payload_size"`
	PayloadSHA256  string    `json:"payload_sha256"`
}

// SnapshotFile is a parsed, checksum-verified snapshot file.
type SnapshotFile struct {
	Header  SnapshotFileHeader
	Payload []byte
}

// EncodeSnapshotFile writes h (its size and checksum filled from payload)
// and payload to w.
func EncodeSnapshotFile(w io.Writer, h SnapshotFileHeader, payload []byte) error {
	sum := sha256.Sum256(payload)
	h.Format, h.Version, h.StateVersion = SnapshotFileFormat, SnapshotFileVersion, state.SnapshotVersion
	h.PayloadSize, h.PayloadSHA256 = int64(len(payload)), hex.EncodeToString(sum[:])
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return err
	}
	_, err = w.Write(payload)
	return err
}

// ReadSnapshotFile parses and verifies a snapshot file of at most maxSize
// bytes: the header's format and versions must be ones this binary reads,
// the payload exactly PayloadSize bytes with nothing after it, and its
// SHA-256 equal to PayloadSHA256. Errors are *Error (invalid_argument)
// naming the field.
func ReadSnapshotFile(r io.Reader, maxSize int64) (*SnapshotFile, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	line, err := readLine(br, MaxSnapshotHeader)
	if err != nil {
		return nil, badFile("header", "%v", err)
	}
	var h SnapshotFileHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, badFile("header", "not a fusebox snapshot file: the first line is not a JSON header: %v", err)
	}
	switch {
	case h.Format != SnapshotFileFormat:
		return nil, badFile("format", "not a fusebox snapshot file: format %q, want %q", h.Format, SnapshotFileFormat)
	case h.Version != SnapshotFileVersion:
		return nil, badFile("version", "snapshot file version %d; this fusebox reads version %d", h.Version, SnapshotFileVersion)
	case h.StateVersion != state.SnapshotVersion:
		return nil, badFile("state_version", "snapshot state version %d; this fusebox reads version %d", h.StateVersion, state.SnapshotVersion)
	case h.PayloadSize < 0 || h.PayloadSize > maxSize:
		return nil, badFile("payload_size", "payload size %d out of range [0, %d]", h.PayloadSize, maxSize)
	case len(h.PayloadSHA256) != 64:
		return nil, badFile("payload_sha256", "want 64 hex digits, got %d characters", len(h.PayloadSHA256))
	}
	want, err := hex.DecodeString(h.PayloadSHA256)
	if err != nil {
		return nil, badFile("payload_sha256", "not hex: %v", err)
	}
	payload := make([]byte, 0, min(h.PayloadSize, 64<<20))
	buf := bytes.NewBuffer(payload)
	n, err := io.Copy(buf, io.LimitReader(br, h.PayloadSize))
	if err != nil {
		return nil, badFile("payload", "read: %v", err)
	}
	if n != h.PayloadSize {
		return nil, badFile("payload", "truncated: %d of %d bytes", n, h.PayloadSize)
	}
	if extra, _ := br.Read(make([]byte, 1)); extra > 0 {
		return nil, badFile("payload", "data after the %d payload bytes the header announces", h.PayloadSize)
	}
	sum := sha256.Sum256(buf.Bytes())
	if !bytes.Equal(sum[:], want) {
		return nil, badFile("payload_sha256", "checksum mismatch: the payload's SHA-256 is %x, the header says %s; the file is damaged", sum, h.PayloadSHA256)
	}
	return &SnapshotFile{Header: h, Payload: buf.Bytes()}, nil
}

func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > limit {
			return nil, fmt.Errorf("header line longer than %d bytes: not a fusebox snapshot file", limit)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, errors.New("no header line: empty or not a fusebox snapshot file")
		default:
			return nil, err
		}
	}
}

func badFile(field, format string, args ...any) *state.Error {
	return &state.Error{Code: state.CodeInvalidArgument, Field: field, Message: "snapshot file: " + fmt.Sprintf(format, args...)}
}

// SnapshotSummary is what a snapshot holds (fusebox admin snapshot inspect).
type SnapshotSummary struct {
	Header          SnapshotFileHeader `json:"header"`
	ClusterID       string             `json:"cluster_id"`
	ConfigEntries   int                `json:"config_entries"`
	ConfigHistory   int                `json:"config_history"`
	Endpoints       int                `json:"endpoints"`
	ForcedBreakers  int                `json:"forced_breakers"`
	ShardCount      int                `json:"shard_count"`
	ShardMapVersion uint64             `json:"shard_map_version"`
	DrainingNodes   int                `json:"draining_nodes"`
	Tasks           map[string]int     `json:"tasks"` // by status
}

// parsedSnapshot is a payload decoded into a state nobody serves.
type parsedSnapshot struct {
	state *state.State
}

// parseSnapshotPayload decodes a payload with the FSM's own parser (so
// everything a restore would refuse is refused here, before raft sees it).
func parseSnapshotPayload(payload []byte) (*parsedSnapshot, uint64, error) {
	st, applied, err := state.ParseSnapshot(bytes.NewReader(payload))
	if err != nil {
		return nil, 0, &state.Error{Code: state.CodeInvalidArgument, Field: "payload", Message: err.Error()}
	}
	return &parsedSnapshot{state: st}, applied, nil
}

// InspectSnapshot summarises a verified snapshot file.
func InspectSnapshot(f *SnapshotFile) (SnapshotSummary, error) {
	p, _, err := parseSnapshotPayload(f.Payload)
	if err != nil {
		return SnapshotSummary{}, err
	}
	st := p.state
	sum := SnapshotSummary{Header: f.Header, ClusterID: st.ClusterID(), ConfigEntries: len(st.Config()),
		ConfigHistory: len(st.ConfigHistory(1 << 30)), Endpoints: len(st.Endpoints()), ForcedBreakers: len(st.ForcedBreakers()),
		ShardCount: st.ShardCount(), DrainingNodes: len(st.DrainingNodes()), Tasks: st.TaskStatusCounts()}
	if m := st.ShardMap(); m != nil {
		sum.ShardMapVersion = m.Version
	}
	return sum, nil
}

// TaskStatuses lists the statuses of a summary in a stable order.
func (s SnapshotSummary) TaskStatuses() []string {
	out := make([]string, 0, len(s.Tasks))
	for k := range s.Tasks {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
