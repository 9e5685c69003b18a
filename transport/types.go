package transport

import (
	"encoding/json"
	"time"
)

// Wire types of the API. They are the external contract: add fields, never
// rename or repurpose them. Internal packages have their own types; the
// handlers translate.

// Member is one entry of GET /v1/cluster/members.
type Member struct {
	ID         string `json:"id"`
	GossipAddr string `json:"gossip_addr"`
	HTTPAddr   string `json:"http_addr"`
	RaftAddr   string `json:"raft_addr"`
	Version    string `json:"version,omitempty"`
	// State is the gossip state: alive, suspect, dead or left.
	State string `json:"state"`
	// RaftRole is voter, nonvoter or none (not in the Raft configuration).
	RaftRole string `json:"raft_role"`
	Leader   bool   `json:"leader"`
	// Suspect is true while the node suspects its own egress (many of its
	// breakers opened at once) and stops sending open hints.
	Suspect bool `json:"suspect,omitempty"`
}

// RaftServer is one server of the Raft configuration.
type RaftServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
}

// RaftInfo is GET /v1/cluster/raft.
type RaftInfo struct {
	NodeID       string       `json:"node_id"`
	State        string       `json:"state"`
	Leader       string       `json:"leader"`
	LeaderAddr   string       `json:"leader_addr"`
	Term         uint64       `json:"term"`
	LastIndex    uint64       `json:"last_index"`
	AppliedIndex uint64       `json:"applied_index"`
	Servers      []RaftServer `json:"servers"`
}

// ConfigEntry is one dynamic-config value with its constraint.
type ConfigEntry struct {
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value"`
	Index       uint64          `json:"index,omitempty"`
	UpdatedAt   time.Time       `json:"updated_at,omitzero"`
	Author      string          `json:"author,omitempty"`
}

// ConfigKey describes a registered dynamic-config key.
type ConfigKey struct {
	Key         string          `json:"key"`
	Type        string          `json:"type"`
	Default     json.RawMessage `json:"default"`
	Constraints []string        `json:"constraints"`
	Description string          `json:"description"`
}

// ConfigChange is one entry of the config history.
type ConfigChange struct {
	Index       uint64          `json:"index"`
	At          time.Time       `json:"at"`
	Author      string          `json:"author,omitempty"`
	Op          string          `json:"op"`
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
}

// ConfigList is GET /v1/config.
type ConfigList struct {
	Entries []ConfigEntry `json:"entries"`
	Keys    []ConfigKey   `json:"keys"`
}

// ConfigWrite is the body of PUT /v1/config/{key}.
type ConfigWrite struct {
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value"`
}

// Endpoint is a Nexus endpoint: a name that resolves to a target URL.
type Endpoint struct {
	Name        string    `json:"name"`
	URL         string    `json:"url"`
	Description string    `json:"description,omitempty"`
	Index       uint64    `json:"index,omitempty"`
	UpdatedAt   time.Time `json:"updated_at,omitzero"`
	Author      string    `json:"author,omitempty"`
}

// WriteResult answers a replicated write: the Raft index it committed at.
type WriteResult struct {
	Index uint64 `json:"index"`
}
