package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
)

// MaxOperationTokenBytes bounds an operation token: the one a start may
// record (raftstore/state refuses a longer operation_id; node's
// TestOperationTokenLimitsAgree holds the two together), and the one a
// cancel's operation_id or a completion's operation_token may carry.
// Temporal's component.nexusoperations.limit.operation.token.length (4096).
const MaxOperationTokenBytes = 4096

// ErrInvalidOperationToken is the cause of a start failed because its
// answer's token is longer than MaxOperationTokenBytes (Temporal's error
// of the same name, components/nexusoperations/executors.go).
var ErrInvalidOperationToken = errors.New("invalid operation token")

// nexusClient builds an sdk client for r. Construction is a URL parse and a
// struct (see DESIGN.md, "sdk clients are not cached"), cheaper than any
// cache keyed by (URL, service) would be to maintain and bound.
func (e *Executor) nexusClient(r *Request) (*nexus.HTTPClient, error) {
	return nexus.NewHTTPClient(nexus.HTTPClientOptions{
		BaseURL:    r.URL,
		Service:    r.Service,
		HTTPCaller: e.do,
	})
}

// startOperation starts r.Operation and fills res on success: OutcomeStarted
// with the operation token, or OutcomeSucceeded with the sync output.
func (e *Executor) startOperation(ctx context.Context, r *Request, res *Result) error {
	client, err := e.nexusClient(r)
	if err != nil {
		return err
	}
	// Pass *nexus.Content: the sdk's default serializer would send a
	// json.RawMessage ([]byte underneath) as application/octet-stream.
	content := &nexus.Content{Data: r.Input}
	if len(r.Input) > 0 {
		content.Header = nexus.Header{"type": "application/json"}
	}
	out, err := client.StartOperation(ctx, r.Operation, content, nexus.StartOperationOptions{
		RequestID:      r.RequestID,
		CallbackURL:    r.CallbackURL,
		CallbackHeader: nexusHeader(r.CallbackHeader),
		Header:         withOperationTimeout(nexusHeader(r.Header), r.Deadline),
	})
	if err != nil {
		return err
	}
	if out.Pending != nil {
		if n := len(out.Pending.Token); n > MaxOperationTokenBytes {
			// No store keeps it (raftstore refuses a longer operation_id),
			// and a cancel or completion could not carry it: recorded, the
			// result was refused and the task called again forever. As
			// Temporal (executors.go executeInvocationTask, isDestinationDown):
			// the start fails, non-retryable, and is no outage — a 2xx is
			// classified failed, so the breaker sees success.
			return fmt.Errorf("%w: length exceeds allowed limit (%d/%d)", ErrInvalidOperationToken, n, MaxOperationTokenBytes)
		}
		res.Outcome = OutcomeStarted
		res.OperationID = out.Pending.Token
		return nil
	}
	rd := out.Successful.Reader
	body, err := io.ReadAll(rd) // bounded by limitedBody
	_ = rd.Close()
	if err != nil {
		return err
	}
	output, ctype := outputJSON(rd.Header.Get("type"), body)
	if limit := r.MaxOutput; limit > 0 && limit < MaxOutputBytes && len(output) > limit {
		// The operator's bound for this destination: every replica keeps
		// an output for the retention, so one destination's large answers
		// took memory and log from every other's.
		return fmt.Errorf("sync output of %d bytes is %d as JSON, more than %d (fusebox.tasks.maxOutputBytes): %w", len(body), len(output), limit, ErrResponseTooLarge)
	}
	if len(output) > MaxOutputBytes {
		// Base64 or JSON escaping can grow a body that fit the read limit
		// past what a result may store: the store would refuse the whole
		// shard's result batch, and its flush would retry it forever.
		return fmt.Errorf("sync output of %d bytes is %d as JSON, more than %d: %w", len(body), len(output), MaxOutputBytes, ErrResponseTooLarge)
	}
	res.Outcome = OutcomeSucceeded
	res.Output, res.OutputContentType = output, ctype
	return nil
}

// MaxOutputBytes bounds a sync start's output as stored (its JSON form):
// raftstore/state.MaxTaskOutputBytes, which node's tests hold it to.
const MaxOutputBytes = 1 << 20

// cancelOperation requests cancelation of the operation r.OperationID. Any
// 2xx counts as delivered (the sdk itself accepts only 202).
func (e *Executor) cancelOperation(ctx context.Context, r *Request, c *capture) error {
	client, err := e.nexusClient(r)
	if err != nil {
		return err
	}
	h, err := client.NewHandle(r.Operation, r.OperationID)
	if err != nil {
		return err
	}
	err = h.Cancel(ctx, nexus.CancelOperationOptions{Header: withRequestID(nexusHeader(r.Header), r.RequestID)})
	if err != nil && c.responded && c.status/100 == 2 && c.bodyErr == nil && !c.tooLarge {
		return nil
	}
	return err
}

// nexusHeader converts extra headers to the sdk's lower-cased Header.
func nexusHeader(h map[string]string) nexus.Header {
	if len(h) == 0 {
		return nil
	}
	out := make(nexus.Header, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}

// withOperationTimeout adds Operation-Timeout, the time left before
// deadline in milliseconds ("1234ms", the sdk's and Temporal's format),
// unless h already has it or there is no deadline. Temporal tells a
// start's handler its remaining schedule-to-close time so
// (components/nexusoperations/executors.go executeInvocationTask: "Set
// the operation timeout header if not already set"); fusebox's deadline is
// that timeout. Measured here, at the call, after any wait for the rate
// limit.
func withOperationTimeout(h nexus.Header, deadline time.Time) nexus.Header {
	if deadline.IsZero() || h.Get(nexus.HeaderOperationTimeout) != "" {
		return h
	}
	left := time.Until(deadline)
	if left <= 0 {
		return h // the queue makes no call then; a direct caller gets none
	}
	if h == nil {
		h = make(nexus.Header, 1)
	}
	h[nexus.HeaderOperationTimeout] = strconv.FormatInt(left.Milliseconds(), 10) + "ms"
	return h
}

func withRequestID(h nexus.Header, id string) nexus.Header {
	if id == "" {
		return h
	}
	if h == nil {
		h = make(nexus.Header, 1)
	}
	h["nexus-request-id"] = id
	return h
}

// outputJSON returns a sync start's output as valid JSON: JSON content
// verbatim, text as a JSON string, anything else as base64 in a JSON string.
func outputJSON(contentType string, body []byte) (json.RawMessage, string) {
	if len(body) == 0 {
		return nil, contentType
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if (mt == "application/json" || mt == "") && json.Valid(body) { // a destination's bytes: encoding/json (internal/fastjson)
		return body, contentType
	}
	var v any = body
	if strings.HasPrefix(mt, "text/") {
		v = strings.ToValidUTF8(string(body), "\uFFFD")
	}
	b, _ := json.Marshal(v) // []byte and string always marshal
	return b, contentType
}
