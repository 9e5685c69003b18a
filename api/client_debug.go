package api

import (
	"context"
	"io"
	"net/url"
	"strconv"
)

// DebugLogs copies the node's recent log lines (GET /v1/debug/logs, JSON
// Lines, oldest first) into w; limit > 0 keeps the newest limit lines.
func (c *Client) DebugLogs(ctx context.Context, limit int, w io.Writer) (int64, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	resp, err := c.raw(ctx, "GET", "/v1/debug/logs", q, nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}

// GetRaw copies the body of GET path (a non-JSON answer: /metrics,
// /debug/pprof/…) into w; an error answer is returned as *Error.
func (c *Client) GetRaw(ctx context.Context, path string, q url.Values, w io.Writer) (int64, error) {
	resp, err := c.raw(ctx, "GET", path, q, nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}
