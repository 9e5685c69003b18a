package shardmap

import (
	"errors"
	"fmt"
)

// ErrWrongOwner matches, with errors.Is, every *WrongOwnerError however deeply
// it is wrapped.
var ErrWrongOwner = errors.New("shardmap: wrong shard owner")

// WrongOwnerError refuses work on a shard by a node that is not, or is no
// longer, its owner at the given epoch. Owner and Epoch are the current
// assignment as the refusing side knows it: the caller should refresh its map
// (or redirect to Owner) rather than retry as is. Owner "" means the shard has
// no owner right now.
type WrongOwnerError struct {
	Shard int    `json:"shard"`
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
}

func (e *WrongOwnerError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("shard ownership lost: shard %d has no owner (epoch %d)", e.Shard, e.Epoch)
	}
	return fmt.Sprintf("shard ownership lost: shard %d is owned by %q at epoch %d", e.Shard, e.Owner, e.Epoch)
}

// Is makes errors.Is(err, ErrWrongOwner) true for any *WrongOwnerError.
func (e *WrongOwnerError) Is(target error) bool {
	return target == ErrWrongOwner
}

// CheckEpoch returns nil if node owns shard at epoch in m, and a
// *WrongOwnerError carrying the current owner and epoch otherwise (also when
// m is nil: ownership cannot be shown, so the write is refused). A shard
// outside [0, NumShards) is an error wrapping ErrNoSuchShard. An unowned shard
// refuses everyone, node "" included.
func CheckEpoch(m *Map, shard int, node string, epoch uint64) error {
	if m == nil {
		return &WrongOwnerError{Shard: shard}
	}
	a, ok := m.Owner(shard)
	if !ok {
		return fmt.Errorf("shardmap: shard %d: %w (NumShards is %d)", shard, ErrNoSuchShard, m.NumShards)
	}
	if a.Owner == "" || a.Owner != node || a.Epoch != epoch {
		return &WrongOwnerError{Shard: shard, Owner: a.Owner, Epoch: a.Epoch}
	}
	return nil
}
