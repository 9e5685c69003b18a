package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"fusebox/internal/authtoken"
	"fusebox/internal/fastjson"
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
		rs := RaftServer{ID: sv.ID, Address: sv.Address, Suffrage: suffrageRole(sv.Suffrage), Leader: sv.ID == st.LeaderID}
		if since, ok := st.HeartbeatsFailing[sv.ID]; ok {
			rs.HeartbeatsFailingSince = &since
		}
		info.Servers = append(info.Servers, rs)
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
// up to 4 MiB of requests) and, on the JSON route, travels base64-encoded,
// a third larger again; the routes take the node role only.
const MaxForwardBodyBytes = 16 << 20

func (s *Server) internalApply(w http.ResponseWriter, r *http.Request) error {
	var in applyRequest
	if err := s.readJSONLimit(w, r, &in, max(MaxForwardBodyBytes, s.cfg.MaxBodyBytes), nil); err != nil {
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

// internalApplyRaw is POST /internal/v1/apply/raw: /internal/v1/apply
// with the command as the body itself (application/octet-stream) and the
// request id in the query. A forwarded command is already encoded (binary
// for the hot task commands); sending it base64 inside a JSON object cost
// the follower an encode and the leader a JSON decode of the whole body
// (2.3 % of BenchmarkDelivery's CPU on the leader's side alone).
func (s *Server) internalApplyRaw(w http.ResponseWriter, r *http.Request) error {
	cmd, err := s.readBody(w, r, max(MaxForwardBodyBytes, s.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	if len(cmd) == 0 {
		return BadField("", "empty command")
	}
	res, err := s.deps.Store.ApplyLocal(r.Context(), cmd, r.URL.Query().Get("request_id"))
	if err != nil {
		return err
	}
	writeJSONFast(w, http.StatusOK, res)
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

	// noRaw: leader HTTP address → when it answered 404 to
	// /internal/v1/apply/raw (a build without the route). Forwards to it
	// use the JSON route until reprobe (default defaultRawReprobe) has
	// passed, then try the raw one again: the leader may have been
	// upgraded in place.
	noRaw   sync.Map
	reprobe time.Duration
}

// defaultRawReprobe is how long a leader that had no raw apply route is
// sent JSON before the raw route is tried again.
const defaultRawReprobe = 5 * time.Minute

// ForwardApply implements raftstore.Forwarder.
func (f *Forwarder) ForwardApply(ctx context.Context, leaderHTTPAddr string, cmd []byte, requestID string) (*state.ApplyResult, error) {
	tok := f.Token
	if f.Tokens != nil {
		tok = f.Tokens.Set().Outgoing()
	}
	c := NewClient(leaderHTTPAddr, tok, f.Client)
	var res state.ApplyResult
	var err error
	if f.tryRaw(leaderHTTPAddr) {
		err = c.applyRaw(ctx, cmd, requestID, &res)
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code == CodeNotFound {
			// A leader on a build without the raw route (a rolling
			// upgrade): JSON to it for a while.
			f.noRaw.Store(leaderHTTPAddr, time.Now())
		} else {
			if err == nil {
				f.noRaw.Delete(leaderHTTPAddr)
			}
			return forwardResult(&res, err)
		}
	}
	err = c.Do(ctx, http.MethodPost, "/internal/v1/apply", nil, applyRequest{Command: cmd, RequestID: requestID}, &res)
	return forwardResult(&res, err)
}

// tryRaw reports whether a forward to addr goes to the raw route: unless
// addr answered 404 to it less than reprobe ago.
func (f *Forwarder) tryRaw(addr string) bool {
	v, ok := f.noRaw.Load(addr)
	if !ok {
		return true
	}
	reprobe := f.reprobe
	if reprobe <= 0 {
		reprobe = defaultRawReprobe
	}
	return time.Since(v.(time.Time)) >= reprobe
}

// forwardResult turns a forward's answer into ForwardApply's: an API
// error becomes a *state.Error with its code (so errors.Is(err,
// ErrNotLeader) works on the follower).
func forwardResult(res *state.ApplyResult, err error) (*state.ApplyResult, error) {
	var e *Error
	if errors.As(err, &e) {
		return nil, &state.Error{Code: e.Code, Message: e.Message, Field: e.Field, LeaderID: e.Leader}
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// applyRaw sends cmd to POST /internal/v1/apply/raw and decodes the
// ApplyResult into out.
func (c *Client) applyRaw(ctx context.Context, cmd []byte, requestID string, out *state.ApplyResult) error {
	var q url.Values
	if requestID != "" {
		q = url.Values{"request_id": {requestID}}
	}
	resp, err := c.raw(ctx, http.MethodPost, "/internal/v1/apply/raw", q, bytes.NewReader(cmd), "application/octet-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("POST /internal/v1/apply/raw: read response: %w", err)
	}
	if err := fastjson.Unmarshal(b, out); err != nil { // the leader's own JSON, on every forwarded write
		return fmt.Errorf("POST /internal/v1/apply/raw: decode response: %w", err)
	}
	return nil
}
