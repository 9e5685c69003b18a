package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Readiness is GET /readyz: whether the node serves, and why not.
type Readiness struct {
	Ready  bool           `json:"ready"`
	Detail map[string]any `json:"detail,omitempty"`
}

// Ready asks the node whether it is ready. A not-ready node answers 503
// with the same body; that is a Readiness, not an error. Errors are the
// connection's, or an answer that is neither.
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var out Readiness
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/readyz", nil)
	if err != nil {
		return out, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return out, decodeError(resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("/readyz answered %d with a body that is not readiness JSON: %w", resp.StatusCode, err)
	}
	return out, nil
}
