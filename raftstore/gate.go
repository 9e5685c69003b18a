package raftstore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"fusebox/raftstore/state"
)

// gateTTL bounds how long a computed cluster log version is reused: the
// hot commands ask on every proposal, and raft's GetConfiguration is a round
// trip through its main loop.
const gateTTL = time.Second

// ClusterVersion is the log version every server of the raft configuration
// advertises (the lowest of them), with the servers below this build's.
type ClusterVersion struct {
	LogVersion int `json:"log_version"`
	// Behind lists "id (log version N)" for each server below this build's
	// log version, "id (unknown)" for one gossip does not show.
	Behind []string `json:"behind,omitempty"`
	at     time.Time
}

// ClusterLogVersion is the log version of the raft configuration as this
// node sees it (cached for up to a second). Compare Nomad's
// ServersMeetMinimumVersion: every server counts, voter or not, since
// non-voters apply the log too.
func (s *Store) ClusterLogVersion() (ClusterVersion, error) {
	if v := s.gateView.Load(); v != nil && time.Since(v.at) < gateTTL {
		return *v, nil
	}
	r := s.raft.Load()
	if r == nil {
		return ClusterVersion{}, unavailable("raft not started")
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return ClusterVersion{}, raftError(r, err)
	}
	byID := map[string]Member{}
	for _, m := range s.deps.Members.Members() {
		byID[m.ID] = m
	}
	v := ClusterVersion{LogVersion: s.cfg.LogVersion, at: time.Now()}
	for _, sv := range f.Configuration().Servers {
		id := string(sv.ID)
		lv := s.cfg.LogVersion
		if id != s.cfg.NodeID {
			m, ok := byID[id]
			switch {
			case !ok:
				lv = 0
			case m.LogVersion <= 0:
				lv = state.LogVersionBase
			default:
				lv = m.LogVersion
			}
		}
		v.LogVersion = min(v.LogVersion, lv)
		switch {
		case lv == 0:
			v.Behind = append(v.Behind, id+" (unknown)")
		case lv < s.cfg.LogVersion:
			v.Behind = append(v.Behind, fmt.Sprintf("%s (log version %d)", id, lv))
		}
	}
	slices.Sort(v.Behind)
	s.gateView.Store(&v)
	return v, nil
}

// clusterKnows reports whether every server knows log version lv (false
// when that cannot be told).
func (s *Store) clusterKnows(lv int) bool {
	if lv <= state.LogVersionBase {
		return true
	}
	v, err := s.ClusterLogVersion()
	return err == nil && v.LogVersion >= lv
}

// requireLogVersion refuses (upgrade_pending, naming field) a write that
// uses a field of an existing command type introduced at log version lv
// while some server is below it: that server's build would apply the entry
// without the field and the replicas would disagree.
func (s *Store) requireLogVersion(lv int, field string) *state.Error {
	if lv > s.cfg.LogVersion {
		return invalidArg(field, "%s needs log version %d; this node's build is at %d", field, lv, s.cfg.LogVersion)
	}
	v, err := s.ClusterLogVersion()
	if err != nil {
		return state.AsError(err)
	}
	if v.LogVersion < lv {
		return &state.Error{Code: state.CodeUpgradePending, Field: field, Message: fmt.Sprintf(
			"%s needs log version %d on every server, and the cluster is at log version %d (behind: %s); upgrade every server first",
			field, lv, v.LogVersion, strings.Join(v.Behind, ", "))}
	}
	return nil
}

// checkGate refuses, before proposing, a command this build does not know
// (unless ignorable) and one newer than the cluster's log version.
func (s *Store) checkGate(t state.MessageType) *state.Error {
	since := state.CommandSince(t)
	if since == 0 || since > s.cfg.LogVersion {
		if t.Ignorable() {
			return nil
		}
		return invalidArg("command", "command type %d is unknown to this node's build (log version %d)", uint8(t), s.cfg.LogVersion)
	}
	if since <= state.LogVersionBase {
		return nil
	}
	v, err := s.ClusterLogVersion()
	if err != nil {
		return state.AsError(err)
	}
	if v.LogVersion < since {
		return &state.Error{Code: state.CodeUpgradePending, Message: fmt.Sprintf(
			"%s needs log version %d on every server, and the cluster is at log version %d (behind: %s); upgrade every server first",
			t, since, v.LogVersion, strings.Join(v.Behind, ", "))}
	}
	return nil
}
