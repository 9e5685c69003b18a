package node

import (
	"encoding/json"
	"strings"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/dynconfig"
	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// raftMembers shows the gossip membership to the Raft store.
type raftMembers struct{ m *cluster.Membership }

func (a raftMembers) Members() []raftstore.Member {
	ms := a.m.Members()
	out := make([]raftstore.Member, 0, len(ms))
	for _, m := range ms {
		st := raftstore.MemberAlive
		switch m.State {
		case cluster.StateSuspect:
			st = raftstore.MemberSuspect
		case cluster.StateDead:
			st = raftstore.MemberFailed
		case cluster.StateLeft:
			st = raftstore.MemberLeft
		}
		out = append(out, raftstore.Member{ID: m.ID, RaftAddr: m.Meta.RaftAddr, HTTPAddr: m.Meta.HTTPAddr, Status: st, LogVersion: m.Meta.LogVersion, ClusterID: m.Meta.ClusterID})
	}
	return out
}

func (a raftMembers) Subscribe() (<-chan struct{}, func()) { return a.m.Subscribe() }

// apiMembers shows the gossip membership to the API.
type apiMembers struct{ m *cluster.Membership }

func (a apiMembers) Members() []api.Member {
	ms := a.m.Members()
	out := make([]api.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, api.Member{ID: m.ID, GossipAddr: m.GossipAddr, HTTPAddr: m.Meta.HTTPAddr,
			RaftAddr: m.Meta.RaftAddr, Version: m.Meta.Version, LogVersion: m.Meta.LogVersion, State: m.State.String(), Suspect: m.Meta.Suspect,
			TaskStoreUnreachable: m.Meta.TaskStoreUnreachable})
	}
	return out
}

// configValidator lets the FSM validate and canonicalize config values with
// the dynamic-config registry.
type configValidator struct{}

func (configValidator) Validate(key, namespace, destination string, value json.RawMessage) (json.RawMessage, error) {
	return dynconfig.Canonical(dynconfig.Entry{Key: key, Namespace: namespace, Destination: destination, Value: value})
}

// configEntries converts the replicated config table for the live
// collection. A destination constraint written as a full callback URL
// (before callback keys were scheme://host) is looked up as its
// scheme://host, the key the queue and the breakers now use; such legacy
// entries go first, so a value written for the host itself wins over them.
func configEntries(es []state.ConfigEntry) []dynconfig.Entry {
	out := make([]dynconfig.Entry, 0, len(es))
	var exact []dynconfig.Entry
	for _, e := range es {
		d := e.Destination
		if strings.Contains(d, "://") {
			d = transport.BreakerDestination(breakerpool.TaskGroupCallback, d)
		}
		ce := dynconfig.Entry{Key: e.Key, Namespace: e.Namespace, Destination: d, Value: e.Value}
		if d != e.Destination {
			out = append(out, ce)
		} else {
			exact = append(exact, ce)
		}
	}
	return append(out, exact...)
}
