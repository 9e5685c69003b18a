package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/nexus-rpc/sdk-go/nexus"
)

// errNotAccepted is the callback's error when the destination answers with
// anything but 2xx; classify reads the status from the capture.
var errNotAccepted = errors.New("callback not accepted")

// callback POSTs r's completion or raw body to r.URL. Any 2xx is success.
func (e *Executor) callback(ctx context.Context, r *Request, c *capture) error {
	req, err := newCallbackRequest(ctx, r)
	if err != nil {
		return err
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	if r.RequestID != "" {
		req.Header.Set("Nexus-Request-Id", r.RequestID)
	}
	resp, err := e.do(req)
	if err != nil {
		return err
	}
	drain(resp.Body) // up to 64 KiB; keeps the connection reusable and the snippet
	if c.bodyErr != nil {
		return c.bodyErr
	}
	if resp.StatusCode/100 != 2 {
		return errNotAccepted
	}
	return nil
}

func newCallbackRequest(ctx context.Context, r *Request) (*http.Request, error) {
	if r.Completion == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
		if err != nil {
			return nil, err
		}
		ct := r.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		req.Header.Set("Content-Type", ct)
		return req, nil
	}
	comp, err := nexusCompletion(r.Completion)
	if err != nil {
		return nil, err
	}
	req, err := nexus.NewCompletionHTTPRequest(ctx, r.URL, comp)
	if err != nil {
		return nil, err
	}
	if tok := r.Completion.OperationToken; tok != "" {
		// sdk-go v0.4.0 sends a failed or canceled completion's token only
		// as the deprecated Nexus-Operation-Id (OperationCompletionUnsuccessful.
		// applyToHTTPRequest sets one header or the other), and Temporal's
		// receiver reads Nexus-Operation-Token alone (common/nexus/nexusrpc/
		// completion.go, completionHTTPHandler.ServeHTTP), as its sender sets
		// it in every state. The sdk's Nexus-Operation-Id stays, for older
		// receivers; Header may not set either (reserved).
		req.Header.Set(nexus.HeaderOperationToken, tok)
	}
	return req, nil
}

func nexusCompletion(c *Completion) (nexus.OperationCompletion, error) {
	switch c.State {
	case CompletionSucceeded:
		content := &nexus.Content{Data: c.Result}
		if len(c.Result) > 0 {
			content.Header = nexus.Header{"type": "application/json"}
		}
		return nexus.NewOperationCompletionSuccessful(content, nexus.OperationCompletionSuccessfulOptions{
			OperationToken: c.OperationToken,
			StartTime:      c.StartTime,
		})
	case CompletionFailed, CompletionCanceled:
		return nexus.NewOperationCompletionUnsuccessful(&nexus.OperationError{
			State: nexus.OperationState(c.State),
			Cause: &nexus.FailureError{Failure: nexus.Failure{Message: c.FailureMessage}},
		}, nexus.OperationCompletionUnsuccessfulOptions{
			OperationToken: c.OperationToken,
			StartTime:      c.StartTime,
		})
	default:
		return nil, fmt.Errorf("completion state %q", c.State)
	}
}
