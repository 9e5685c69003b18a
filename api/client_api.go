package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Typed calls over Do, one per API route.

// Members lists the gossip members with their Raft roles.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var out []Member
	return out, c.Do(ctx, http.MethodGet, "/v1/cluster/members", nil, nil, &out)
}

// Raft describes the Raft configuration as this node sees it.
func (c *Client) Raft(ctx context.Context) (RaftInfo, error) {
	var out RaftInfo
	return out, c.Do(ctx, http.MethodGet, "/v1/cluster/raft", nil, nil, &out)
}

// ConfigList lists every dynamic-config value and the registered keys.
func (c *Client) ConfigList(ctx context.Context) (ConfigList, error) {
	var out ConfigList
	return out, c.Do(ctx, http.MethodGet, "/v1/config", nil, nil, &out)
}

// ConfigGet returns the values of one key (every constraint).
func (c *Client) ConfigGet(ctx context.Context, key string) ([]ConfigEntry, error) {
	var out []ConfigEntry
	return out, c.Do(ctx, http.MethodGet, "/v1/config/"+url.PathEscape(key), nil, nil, &out)
}

// ConfigSet writes one value; nothing is written if it is invalid.
func (c *Client) ConfigSet(ctx context.Context, key string, w ConfigWrite) (WriteResult, error) {
	var out WriteResult
	return out, c.Do(ctx, http.MethodPut, "/v1/config/"+url.PathEscape(key), nil, w, &out)
}

// ConfigDelete removes the value of key under the given constraint.
func (c *Client) ConfigDelete(ctx context.Context, key, namespace, destination string) (WriteResult, error) {
	q := url.Values{}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	if destination != "" {
		q.Set("destination", destination)
	}
	var out WriteResult
	return out, c.Do(ctx, http.MethodDelete, "/v1/config/"+url.PathEscape(key), q, nil, &out)
}

// ConfigHistory returns the newest changes first, at most limit.
func (c *Client) ConfigHistory(ctx context.Context, limit int) ([]ConfigChange, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", itoa(limit))
	}
	var out []ConfigChange
	return out, c.Do(ctx, http.MethodGet, "/v1/config/_history", q, nil, &out)
}

// Endpoints lists the Nexus endpoint registry.
func (c *Client) Endpoints(ctx context.Context) ([]Endpoint, error) {
	var out []Endpoint
	return out, c.Do(ctx, http.MethodGet, "/v1/endpoints", nil, nil, &out)
}

// Endpoint returns one endpoint.
func (c *Client) Endpoint(ctx context.Context, name string) (Endpoint, error) {
	var out Endpoint
	return out, c.Do(ctx, http.MethodGet, "/v1/endpoints/"+url.PathEscape(name), nil, nil, &out)
}

// PutEndpoint creates or replaces an endpoint.
func (c *Client) PutEndpoint(ctx context.Context, e Endpoint) (WriteResult, error) {
	var out WriteResult
	return out, c.Do(ctx, http.MethodPut, "/v1/endpoints/"+url.PathEscape(e.Name), nil, e, &out)
}

// DeleteEndpoint removes an endpoint.
func (c *Client) DeleteEndpoint(ctx context.Context, name string) (WriteResult, error) {
	var out WriteResult
	return out, c.Do(ctx, http.MethodDelete, "/v1/endpoints/"+url.PathEscape(name), nil, nil, &out)
}

func itoa(n int) string { return strconv.Itoa(n) }

// Breakers lists this node's breakers, or every node's with cluster true.
func (c *Client) Breakers(ctx context.Context, cluster bool) (BreakerList, error) {
	var q url.Values
	if cluster {
		q = url.Values{"scope": {"cluster"}}
	}
	var out BreakerList
	return out, c.Do(ctx, http.MethodGet, "/v1/breakers", q, nil, &out)
}

// ForceBreaker forces a breaker key open, closed or back to auto on every
// node (stored in Raft).
func (c *Client) ForceBreaker(ctx context.Context, f BreakerForce) (ForcedBreaker, error) {
	var out ForcedBreaker
	return out, c.Do(ctx, http.MethodPost, "/v1/breakers/force", nil, f, &out)
}

// ForcedBreakers lists the forced keys stored in Raft.
func (c *Client) ForcedBreakers(ctx context.Context) ([]ForcedBreaker, error) {
	var out []ForcedBreaker
	return out, c.Do(ctx, http.MethodGet, "/v1/breakers/forced", nil, nil, &out)
}

// ConfigImport sends a Temporal dynamic-config YAML file: validated whole,
// applied as one Raft entry unless dryRun.
func (c *Client) ConfigImport(ctx context.Context, file []byte, dryRun bool) (ConfigImportResult, error) {
	var out ConfigImportResult
	return out, c.Do(ctx, http.MethodPost, "/v1/config:import", nil, ConfigImport{File: string(file), DryRun: dryRun}, &out)
}
