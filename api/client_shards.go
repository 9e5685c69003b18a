package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"fusebox/shardmap"
)

// Shards returns the committed shard map.
func (c *Client) Shards(ctx context.Context) (ShardList, error) {
	var out ShardList
	return out, c.Do(ctx, http.MethodGet, "/v1/shards", nil, nil, &out)
}

// Shard describes one shard.
func (c *Client) Shard(ctx context.Context, shard int) (ShardDetail, error) {
	var out ShardDetail
	return out, c.Do(ctx, http.MethodGet, shardPath(shard, ""), nil, nil, &out)
}

// MoveShard pins shard to node; the answer is the assignment once the leader
// moved it (or the pinned assignment if that took longer than the server
// waits).
func (c *Client) MoveShard(ctx context.Context, shard int, node string) (Shard, error) {
	var out Shard
	return out, c.Do(ctx, http.MethodPost, shardPath(shard, "/move"), nil, ShardMove{Node: node}, &out)
}

// UnpinShard removes shard's pin.
func (c *Client) UnpinShard(ctx context.Context, shard int) (Shard, error) {
	var out Shard
	return out, c.Do(ctx, http.MethodPost, shardPath(shard, "/unpin"), nil, nil, &out)
}

// CloseShard makes shard's owner release it; the leader assigns it again
// with a new epoch. With epoch non-nil the close is refused with a
// wrong_owner error (see AsWrongOwner) unless the shard is at that epoch;
// with epoch nil it is an explicit forced close ({"force": true}).
func (c *Client) CloseShard(ctx context.Context, shard int, epoch *uint64) (Shard, error) {
	in := ShardClose{Epoch: epoch, Force: epoch == nil}
	var out Shard
	return out, c.Do(ctx, http.MethodPost, shardPath(shard, "/close"), nil, in, &out)
}

// NodeShards returns what node owns and whether it is draining.
func (c *Client) NodeShards(ctx context.Context, node string) (NodeShards, error) {
	var out NodeShards
	return out, c.Do(ctx, http.MethodGet, nodePath(node, "/shards"), nil, nil, &out)
}

// DrainNode marks node draining; its shards move away as the leader
// re-places them. Poll NodeShards to follow them.
func (c *Client) DrainNode(ctx context.Context, node string) (NodeShards, error) {
	var out NodeShards
	return out, c.Do(ctx, http.MethodPost, nodePath(node, "/drain"), nil, nil, &out)
}

// UndrainNode puts node back into shard placement.
func (c *Client) UndrainNode(ctx context.Context, node string) (NodeShards, error) {
	var out NodeShards
	return out, c.Do(ctx, http.MethodDelete, nodePath(node, "/drain"), nil, nil, &out)
}

func shardPath(shard int, suffix string) string {
	return "/v1/shards/" + strconv.Itoa(shard) + suffix
}

func nodePath(node, suffix string) string {
	return "/v1/nodes/" + url.PathEscape(node) + suffix
}

// AsWrongOwner rebuilds the server's *shardmap.WrongOwnerError from an API
// error with code wrong_owner, so a caller can follow the owner (and
// errors.Is(err, shardmap.ErrWrongOwner) holds on the result).
func AsWrongOwner(err error) (*shardmap.WrongOwnerError, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeWrongOwner {
		return nil, false
	}
	wo := &shardmap.WrongOwnerError{Owner: e.Owner, Epoch: e.Epoch}
	if e.Shard != nil {
		wo.Shard = *e.Shard
	}
	return wo, true
}
