package cluster

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// Meta is a node's metadata, gossiped with its alive messages as JSON. The
// encoded form must fit memberlist.MetaMaxSize (512 bytes).
type Meta struct {
	// ID is the node ID (equal to the memberlist name).
	ID string `json:"id"`
	// HTTPAddr is the node's API address, host:port.
	HTTPAddr string `json:"http,omitempty"`
	// RaftAddr is the node's Raft transport address, host:port.
	RaftAddr string `json:"raft,omitempty"`
	// Version is the fusebox build version.
	Version string `json:"ver,omitempty"`
	// Suspect says the node believes its own egress is unhealthy (many
	// destinations failing at once), so peers should discount its hints.
	Suspect bool `json:"suspect,omitempty"`
	// LogVersion is the raft log version the node's build proposes and
	// applies (raftstore/state.BuildLogVersion); absent (0) on older builds.
	LogVersion int `json:"logv,omitempty"`
}

func (m Meta) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("encoded metadata is %d bytes, max %d", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta parses a peer's metadata. Peers are untrusted: oversized or
// malformed metadata is an error and the member is kept with empty Meta.
func decodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, nil
	}
	if len(b) > memberlist.MetaMaxSize {
		return m, fmt.Errorf("metadata is %d bytes, max %d", len(b), memberlist.MetaMaxSize)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("metadata: %w", err)
	}
	return m, nil
}
