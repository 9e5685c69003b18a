package cluster

import (
	"fmt"
	"time"
)

// MemberState is a member's gossip state.
type MemberState uint8

// Member states. memberlist v0.7.0 reports no event when a member becomes
// suspect (and leaves memberlist.Node.State unset in events), so Members()
// reports alive, dead and left; StateSuspect exists for API stability.
const (
	StateAlive MemberState = iota
	StateSuspect
	StateDead // failed: stopped answering probes without leaving
	StateLeft // left gracefully (Leave / Close)
)

func (s MemberState) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateSuspect:
		return "suspect"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return fmt.Sprintf("MemberState(%d)", uint8(s))
}

// MarshalText renders the state as its name, for JSON.
func (s MemberState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Member is one node as this node sees it.
type Member struct {
	ID         string      `json:"id"`
	GossipAddr string      `json:"gossip_addr"`
	Meta       Meta        `json:"meta"`
	State      MemberState `json:"state"`
	// StateChanged is when this node observed the latest state change.
	StateChanged time.Time `json:"state_changed"`
}
