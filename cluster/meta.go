package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

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
	// TaskStoreUnreachable says the node has not reached its task store
	// (the PostgreSQL database) for a while: the raft leader, if it reaches
	// the database itself, places no shard on it (node/pghealth.go). Older
	// builds ignore the field.
	TaskStoreUnreachable bool `json:"tsu,omitempty"`
	// ClusterID is the id of the Raft history the node's data dir holds
	// (empty on a fresh data dir, and on older builds): a member with
	// another is never added to the Raft configuration or given shards
	// (node/clusterid.go).
	ClusterID string `json:"cid,omitempty"`
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
	for _, f := range []struct{ name, addr string }{{"http", m.HTTPAddr}, {"raft", m.RaftAddr}} {
		if f.addr == "" {
			continue
		}
		if err := CheckHostPort(f.addr); err != nil {
			return Meta{}, fmt.Errorf("metadata: %s: %w", f.name, err)
		}
	}
	return m, nil
}

// CheckHostPort holds an advertised address to host:port: a host (a name
// or an IP, IPv6 in brackets) and a port 1–65535, nothing else. Peers call
// a member's HTTP address with the cluster's token, and put https:// in
// front of it when TLS is on: a scheme, a path or user info there would
// let whoever holds the gossip key choose how (http://, in clear) or where
// that token goes. The node checks its own advertised addresses with it
// at start, so a node is never configured into metadata its peers refuse.
func CheckHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%.80q is not host:port", addr)
	}
	if host == "" || strings.ContainsAny(host, "/@?#%\\") || strings.ContainsFunc(host, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return fmt.Errorf("%.80q: not a host name or IP address", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.ContainsAny(port, "+-") {
		return fmt.Errorf("%.80q: port %.10q is not 1-65535", addr, port)
	}
	return nil
}
