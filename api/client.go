package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxResponseBytes bounds what the client reads from a node.
const maxResponseBytes = 32 << 20

// Client is the Go client of the API, used by the CLI, by leader forwarding
// and by the end-to-end tests. Non-2xx answers come back as *Error with the
// server's code and typed fields.
type Client struct {
	base  string
	token string
	hc    *http.Client
	// Author, when set, is sent as X-Fusebox-Author and recorded with the
	// writes this client makes (the CLI sends user@host).
	Author string
}

// sharedTransport serves every Client built without its own http.Client.
// net/http's DefaultTransport keeps only 2 idle connections per host, so a
// follower forwarding concurrent writes to the leader (or a client with
// many requests in flight) would dial and tear down a connection for most
// requests (dialConn was 7% of a loaded cluster's CPU). 64 idle
// connections per node cover the API's concurrency; idle ones close after
// 90 s.
var sharedTransport = &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:          1024,
	MaxIdleConnsPerHost:   64,
	IdleConnTimeout:       90 * time.Second,
	TLSHandshakeTimeout:   10 * time.Second,
	ExpectContinueTimeout: time.Second,
	ForceAttemptHTTP2:     true,
}

// NewClient returns a client for a node at addr ("host:port" or a URL). A
// nil hc uses a client with a 30 s timeout over a shared pooled transport.
func NewClient(addr, token string, hc *http.Client) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second, Transport: sharedTransport}
	}
	return &Client{base: strings.TrimRight(addr, "/"), token: token, hc: hc}
}

// NewTLSClient is NewClient for a node that serves HTTPS: an addr without
// a scheme gets https://, and hc (required) carries the TLS configuration
// (a node's mutual-TLS peer transport, or the CLI's CA and client
// certificate).
func NewTLSClient(addr, token string, hc *http.Client) *Client {
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	return NewClient(addr, token, hc)
}

// WithTimeout returns a copy of c whose calls time out after d (the
// client's own bound; a context may end them sooner): for a call that may
// take longer than the default 30 s, as a delegated call whose own timeout
// is longer does.
func (c *Client) WithTimeout(d time.Duration) *Client {
	hc := *c.hc
	hc.Timeout = d
	out := *c
	out.hc = &hc
	return &out
}

// Addr is the node's base URL.
func (c *Client) Addr() string { return c.base }

// Do sends in (JSON, unless nil) and decodes a 2xx answer into out (unless
// nil). query may be nil.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.Author != "" {
		req.Header.Set("X-Fusebox-Author", c.Author)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := decodeError(resp.StatusCode, b)
		if ra := resp.Header.Get("Retry-After"); ra != "" && e.RetryAfter == 0 {
			fmt.Sscanf(ra, "%d", &e.RetryAfter)
		}
		return e
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}
