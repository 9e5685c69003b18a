package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"fusebox/raftstore/state"
)

// CallDelegate is this node making a call a peer's own breaker refused
// (node/delegate.go): the peer's egress to the destination fails where this
// node's calls pass (hintpolicy/DESIGN.md, "Calls through a peer"). The
// call goes through this node's breaker, allowlist and dial policy.
type CallDelegate interface {
	Delegated(ctx context.Context, in DelegateRequest) DelegateAnswer
}

// DelegateRequest is POST /internal/v1/calls/delegate: one attempt of a
// task, as the peer that owns it would have made it.
type DelegateRequest struct {
	// Namespace and Destination are the task's breaker key's (Destination:
	// the endpoint name of a Nexus task, the callback URL's
	// scheme://host[:port] of a callback task); this node calls through
	// its own breaker for the same key.
	Namespace   string `json:"namespace"`
	Destination string `json:"destination"`
	// Request is the attempt's outbound request (transport.Request's JSON).
	Request json.RawMessage `json:"request"`
	// Deadline is the task's schedule-to-close deadline (zero: none).
	Deadline time.Time `json:"deadline,omitzero"`
	// MaxOutput bounds a sync start's output as stored (0: the default).
	MaxOutput int `json:"max_output,omitempty"`
}

// DelegateAnswer is what came of a delegated call. Made is false when this
// node made no call (NotMade says why: breaker_open, invalid,
// not_allowed, unknown_endpoint); otherwise Outcome is the
// attempt's (transport.Outcome's name: succeeded, started, failed, down,
// aborted) with the destination's answer.
type DelegateAnswer struct {
	Made              bool            `json:"made"`
	NotMade           string          `json:"not_made,omitempty"`
	Outcome           string          `json:"outcome,omitempty"`
	Status            int             `json:"status,omitempty"`
	OperationID       string          `json:"operation_id,omitempty"`
	Output            json.RawMessage `json:"output,omitempty"`
	OutputContentType string          `json:"output_content_type,omitempty"`
	Message           string          `json:"message,omitempty"`
	// RetryAfter is the destination's Retry-After deadline of a down
	// answer (zero: none).
	RetryAfter time.Time `json:"retry_after,omitzero"`
}

// maxDelegateBody bounds a delegated call's body: one task's request
// (state.MaxTaskRequestBytes) as JSON, with room for its base64 body.
const maxDelegateBody = 4 * state.MaxTaskRequestBytes

// Validate checks the request's envelope, naming the bad field; the
// request itself is validated by the delegate as the queue validates it.
func (r *DelegateRequest) Validate() error {
	switch {
	case r.Namespace == "":
		return BadField("namespace", "required")
	case r.Destination == "":
		return BadField("destination", "required")
	case len(r.Request) == 0 || string(r.Request) == "null":
		return BadField("request", "required")
	case r.MaxOutput < 0:
		return BadField("max_output", "must not be negative, got %d", r.MaxOutput)
	}
	return nil
}

func (s *Server) delegateRoutes() {
	s.handle("POST /internal/v1/calls/delegate", needNode, s.delegate)
}

func (s *Server) delegate(w http.ResponseWriter, r *http.Request) error {
	var in DelegateRequest
	if err := s.readJSONLimit(w, r, &in, maxDelegateBody, nil); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.deps.Delegate.Delegated(r.Context(), in))
	return nil
}

// Delegate asks this client's node to make a call its caller's breaker
// refused (what a node whose egress fails calls on a peer whose passes).
func (c *Client) Delegate(ctx context.Context, in DelegateRequest) (DelegateAnswer, error) {
	var out DelegateAnswer
	return out, c.Do(ctx, http.MethodPost, "/internal/v1/calls/delegate", nil, in, &out)
}
