package api

import (
	"context"
	"errors"
	"net/http"

	"fusebox/internal/authtoken"
	"fusebox/raftstore/state"
)

func (s *Server) clusterMembers(w http.ResponseWriter, r *http.Request) error {
	ms := s.deps.Members.Members()
	roles := map[string]string{}
	leader := ""
	if s.deps.Store != nil {
		leader, _ = s.deps.Store.Leader()
		if servers, err := s.deps.Store.Configuration(); err == nil {
			for _, sv := range servers {
				roles[sv.ID] = suffrageRole(sv.Suffrage)
			}
		}
	}
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		m.RaftRole = roles[m.ID]
		if m.RaftRole == "" {
			m.RaftRole = "none"
		}
		m.Leader = m.ID == leader && leader != ""
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func suffrageRole(s string) string {
	switch s {
	case "Voter":
		return "voter"
	case "Nonvoter":
		return "nonvoter"
	case "Staging":
		return "staging"
	default:
		return s
	}
}

func (s *Server) clusterRaft(w http.ResponseWriter, r *http.Request) error {
	st := s.deps.Store.Stats()
	info := RaftInfo{
		NodeID: s.deps.Store.NodeID(), State: st.State, Leader: st.LeaderID, LeaderAddr: st.LeaderAddr,
		Term: st.Term, LastIndex: st.LastIndex, AppliedIndex: st.AppliedIndex, Servers: []RaftServer{},
		LogStore: st.LogStore,
	}
	servers, err := s.deps.Store.Configuration()
	if err != nil {
		return err
	}
	for _, sv := range servers {
		info.Servers = append(info.Servers, RaftServer{ID: sv.ID, Address: sv.Address, Suffrage: suffrageRole(sv.Suffrage), Leader: sv.ID == st.LeaderID})
	}
	if v, err := s.deps.Store.ClusterLogVersion(); err == nil {
		info.LogVersion, info.LogVersionBehind = v.LogVersion, v.Behind
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// applyRequest is the body of POST /internal/v1/apply: a Raft command
// forwarded by a follower to the leader.
type applyRequest struct {
	Command   []byte `json:"command"`
	RequestID string `json:"request_id"`
}

// MaxForwardBodyBytes bounds a forwarded command's body. It is larger than
// the API's own bound (MaxBodyBytes) because a command can be larger than
// the request that made it (a node's group commit coalesces single submits
// up to 4 MiB of requests) and travels base64-encoded, a third larger
// again; the route takes the node role only.
const MaxForwardBodyBytes = 16 << 20

func (s *Server) internalApply(w http.ResponseWriter, r *http.Request) error {
	var in applyRequest
	if err := s.readJSONLimit(w, r, &in, max(MaxForwardBodyBytes, s.cfg.MaxBodyBytes)); err != nil {
		return err
	}
	if len(in.Command) == 0 {
		return BadField("command", "empty command")
	}
	res, err := s.deps.Store.ApplyLocal(r.Context(), in.Command, in.RequestID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// Forwarder implements raftstore.Forwarder over this API: a follower sends
// the command to the leader's POST /internal/v1/apply, and errors come back
// as *state.Error with their code, so errors.Is(err, ErrNotLeader) works
// on the follower.
type Forwarder struct {
	// Token is the admin token, when the cluster has one.
	Token string
	// Tokens, when set, wins over Token: the set in force at each call
	// gives the node's outgoing token (its first node token, else its
	// first admin token), so a reload applies to the next forward.
	Tokens *authtoken.Store
	Client *http.Client
}

// ForwardApply implements raftstore.Forwarder.
func (f *Forwarder) ForwardApply(ctx context.Context, leaderHTTPAddr string, cmd []byte, requestID string) (*state.ApplyResult, error) {
	tok := f.Token
	if f.Tokens != nil {
		tok = f.Tokens.Set().Outgoing()
	}
	c := NewClient(leaderHTTPAddr, tok, f.Client)
	var res state.ApplyResult
	err := c.Do(ctx, http.MethodPost, "/internal/v1/apply", nil, applyRequest{Command: cmd, RequestID: requestID}, &res)
	var e *Error
	if errors.As(err, &e) {
		return nil, &state.Error{Code: e.Code, Message: e.Message, Field: e.Field, LeaderID: e.Leader}
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}
