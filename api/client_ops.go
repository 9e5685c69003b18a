package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"fusebox/raftstore"
)

// KeyringKey is one key of a node's gossip keyring, by fingerprint only:
// keys never leave a node in an answer.
type KeyringKey struct {
	Fingerprint string `json:"fingerprint"`
	Primary     bool   `json:"primary"`
}

// KeyringNode is one node's keyring (or why it could not be read/changed).
type KeyringNode struct {
	Node string       `json:"node"`
	Keys []KeyringKey `json:"keys,omitempty"`
	// Persisted says the key file (--gossip-key-file) was rewritten.
	Persisted bool   `json:"persisted,omitempty"`
	Error     string `json:"error,omitempty"`
}

// KeyringSummary is one key across the cluster.
type KeyringSummary struct {
	Fingerprint string `json:"fingerprint"`
	Nodes       int    `json:"nodes"`      // live members holding it
	PrimaryOn   int    `json:"primary_on"` // live members encrypting with it
}

// KeyringAnswer is GET/POST /v1/operator/keyring.
type KeyringAnswer struct {
	Op      string           `json:"op"`
	Members int              `json:"members"` // live members asked
	Failed  int              `json:"failed"`  // of them, those that failed
	Keys    []KeyringSummary `json:"keys"`
	Nodes   []KeyringNode    `json:"nodes"`
}

// TransferLeader asks the leader to hand leadership to voter to (any when
// empty).
func (c *Client) TransferLeader(ctx context.Context, to string) (raftstore.TransferResult, error) {
	var out raftstore.TransferResult
	err := c.Do(ctx, http.MethodPost, "/v1/operator/raft/transfer-leader", nil, transferRequest{To: to}, &out)
	return out, err
}

// RemovePeer asks the leader to remove server id from the raft configuration.
func (c *Client) RemovePeer(ctx context.Context, id string, force bool) (raftstore.RemovePeerResult, error) {
	var out raftstore.RemovePeerResult
	err := c.Do(ctx, http.MethodPost, "/v1/operator/raft/remove-peer", nil, removePeerRequest{ID: id, Force: force}, &out)
	return out, err
}

// SaveSnapshot copies a snapshot file of the cluster's state into w.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.raw(ctx, http.MethodGet, "/v1/operator/snapshot", nil, nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, io.LimitReader(resp.Body, MaxSnapshotBytes+1))
	if err != nil {
		return n, fmt.Errorf("GET /v1/operator/snapshot: read: %w", err)
	}
	return n, nil
}

// RestoreSnapshot uploads a snapshot file; force accepts one written by
// another fusebox version.
func (c *Client) RestoreSnapshot(ctx context.Context, file io.Reader, force bool) (raftstore.RestoreResult, error) {
	var out raftstore.RestoreResult
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	resp, err := c.raw(ctx, http.MethodPut, "/v1/operator/snapshot", q, file, snapshotContentType)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	return out, decodeBody(resp, &out)
}

// Keyring lists (op "list") or changes the gossip keyring of every live
// member.
func (c *Client) Keyring(ctx context.Context, op, key string) (KeyringAnswer, error) {
	var out KeyringAnswer
	if op == "list" {
		return out, c.Do(ctx, http.MethodGet, "/v1/operator/keyring", nil, nil, &out)
	}
	return out, c.Do(ctx, http.MethodPost, "/v1/operator/keyring", nil, keyringRequest{Op: op, Key: key}, &out)
}

// LocalKeyring lists or changes one node's keyring (what a node calls on
// its peers during a cluster keyring operation).
func (c *Client) LocalKeyring(ctx context.Context, op, key string) (KeyringNode, error) {
	var out KeyringNode
	if op == "list" {
		return out, c.Do(ctx, http.MethodGet, "/internal/v1/keyring", nil, nil, &out)
	}
	return out, c.Do(ctx, http.MethodPost, "/internal/v1/keyring", nil, keyringRequest{Op: op, Key: key}, &out)
}

// raw sends body as is and returns a 2xx response for the caller to read
// (and close); other answers come back as *Error.
func (c *Client) raw(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, decodeError(resp.StatusCode, b)
	}
	return resp, nil
}

func decodeBody(resp *http.Response, out any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// relay sends the incoming request r (method, path, query, body) to this
// client's node and copies the answer into w. The caller's token is the
// client's.
func (c *Client) relay(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	u := c.base + r.URL.Path
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, r.Body)
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set(relayedHeader, "1")
	hc := *c.hc
	hc.Timeout = 0 // bounded by ctx: a snapshot may take longer than the default
	resp, err := hc.Do(req)
	if err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "relay to the leader at " + c.base + ": " + err.Error(), RetryAfter: 1}
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Content-Disposition", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return nil
}
