package api

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore"
)

// Ops is the operator toolkit (fusebox admin raft / snapshot / keyring);
// node/ops.go implements it.
type Ops interface {
	// TransferLeader and RemovePeer run on the leader (raftstore).
	TransferLeader(ctx context.Context, to string) (raftstore.TransferResult, error)
	RemovePeer(ctx context.Context, id string, force bool) (raftstore.RemovePeerResult, error)
	// SaveSnapshot returns a snapshot file of the replicated state (leader).
	SaveSnapshot(ctx context.Context) ([]byte, error)
	// RestoreSnapshot replaces the replicated state with a snapshot file's
	// (leader). force accepts a file written by another fusebox version.
	RestoreSnapshot(ctx context.Context, file io.Reader, force bool) (raftstore.RestoreResult, error)
	// LocalKeyring lists or changes this node's gossip keyring (op list,
	// install, use, remove) and persists it.
	LocalKeyring(ctx context.Context, op, key string) (KeyringNode, error)
	// ClusterKeyring runs op on every live member (their LocalKeyring).
	ClusterKeyring(ctx context.Context, op, key string) (KeyringAnswer, error)
	// PeerClient reaches member id's API with token (the caller's own, for
	// a relay to the leader), over TLS when the node uses it.
	PeerClient(id, token string) (*Client, bool)
}

// Bounds of a snapshot upload (PUT /v1/operator/snapshot): an admin's
// authenticated request may take this long and be this large.
const (
	MaxSnapshotBytes     = 1 << 30
	snapshotBodyTimeout  = 5 * time.Minute
	relayedHeader        = "X-Fusebox-Relayed"
	snapshotContentType  = "application/octet-stream"
	snapshotDispositionV = `attachment; filename="fusebox.snap"`
)

// opsRoutes are the operator routes; all need admin, except the per-node
// keyring calls a node makes to its peers with its own (node) token.
func (s *Server) opsRoutes() {
	s.handle("POST /v1/operator/raft/transfer-leader", needAdmin, s.leaderOnly(s.transferLeader))
	s.handle("POST /v1/operator/raft/remove-peer", needAdmin, s.leaderOnly(s.removePeer))
	s.handle("GET /v1/operator/snapshot", needAdmin, s.leaderOnly(s.saveSnapshot))
	s.handle("PUT /v1/operator/snapshot", needAdmin, s.leaderOnly(s.restoreSnapshot))
	s.handle("GET /v1/operator/keyring", needAdmin, s.clusterKeyring)
	s.handle("POST /v1/operator/keyring", needAdmin, s.clusterKeyring)
	s.handle("GET /internal/v1/keyring", needNode, s.localKeyring)
	s.handle("POST /internal/v1/keyring", needNode, s.localKeyring)
}

type transferRequest struct {
	To string `json:"to,omitempty"`
}

type removePeerRequest struct {
	ID    string `json:"id"`
	Force bool   `json:"force,omitempty"`
}

func (s *Server) transferLeader(w http.ResponseWriter, r *http.Request) error {
	var in transferRequest
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	res, err := s.deps.Ops.TransferLeader(r.Context(), in.To)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) removePeer(w http.ResponseWriter, r *http.Request) error {
	var in removePeerRequest
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	if in.ID == "" {
		return BadField("id", "id: name the raft server to remove (fusebox admin raft lists them)")
	}
	res, err := s.deps.Ops.RemovePeer(r.Context(), in.ID, in.Force)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) saveSnapshot(w http.ResponseWriter, r *http.Request) error {
	b, err := s.deps.Ops.SaveSnapshot(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", snapshotContentType)
	w.Header().Set("Content-Disposition", snapshotDispositionV)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

func (s *Server) restoreSnapshot(w http.ResponseWriter, r *http.Request) error {
	// Authorised as admin by now: allow a large, slow upload.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(snapshotBodyTimeout))
	body := http.MaxBytesReader(w, r.Body, MaxSnapshotBytes)
	res, err := s.deps.Ops.RestoreSnapshot(r.Context(), body, r.URL.Query().Get("force") == "true")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// leaderOnly runs h on the raft leader: a follower relays the request, body
// and caller's token included, to the leader's API and copies the answer
// back. A relayed request that reaches a non-leader (leadership moved in
// between) is answered not_leader, never relayed again.
func (s *Server) leaderOnly(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.deps.Store.State() == raft.Leader {
			return h(w, r)
		}
		leader, _ := s.deps.Store.Leader()
		if leader == "" {
			return &Error{Status: http.StatusServiceUnavailable, Code: CodeNoLeader, Message: "no raft leader is known; the operation needs one", RetryAfter: 1}
		}
		if r.Header.Get(relayedHeader) != "" {
			return &Error{Status: http.StatusServiceUnavailable, Code: CodeNotLeader, Message: "this node is not the raft leader (leadership moved while relaying)", Leader: leader, RetryAfter: 1}
		}
		c, ok := s.deps.Ops.PeerClient(leader, bearer(r))
		if !ok {
			return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the leader " + leader + " has no known HTTP address", Leader: leader, RetryAfter: 1}
		}
		if r.Method == http.MethodPut {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(snapshotBodyTimeout))
		}
		return c.relay(r.Context(), w, r)
	}
}

func bearer(r *http.Request) string {
	const p = "Bearer "
	if h := r.Header.Get("Authorization"); len(h) > len(p) && h[:len(p)] == p {
		return h[len(p):]
	}
	return ""
}

// keyringRequest is the body of POST /v1/operator/keyring and of
// POST /internal/v1/keyring.
type keyringRequest struct {
	Op  string `json:"op"`
	Key string `json:"key,omitempty"`
}

func (s *Server) readKeyringRequest(w http.ResponseWriter, r *http.Request) (keyringRequest, error) {
	if r.Method == http.MethodGet {
		return keyringRequest{Op: "list"}, nil
	}
	var in keyringRequest
	if err := s.readJSON(w, r, &in); err != nil {
		return in, err
	}
	switch in.Op {
	case "install", "use", "remove":
	default:
		return in, BadField("op", "op %q: want install, use or remove (GET lists)", in.Op)
	}
	if in.Key == "" {
		return in, BadField("key", "key: give the base64 gossip key to %s", in.Op)
	}
	return in, nil
}

func (s *Server) clusterKeyring(w http.ResponseWriter, r *http.Request) error {
	in, err := s.readKeyringRequest(w, r)
	if err != nil {
		return err
	}
	res, err := s.deps.Ops.ClusterKeyring(r.Context(), in.Op, in.Key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) localKeyring(w http.ResponseWriter, r *http.Request) error {
	in, err := s.readKeyringRequest(w, r)
	if err != nil {
		return err
	}
	res, err := s.deps.Ops.LocalKeyring(r.Context(), in.Op, in.Key)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
