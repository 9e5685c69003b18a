package raftstore

import (
	"context"
	"errors"

	"fusebox/raftstore/state"
)

// applyBinOrJSON proposes a task command in its binary type when every
// server knows LogVersionTasksBin and the command encodes (bin), else in
// its JSON type — the SetConfig pattern (helpers.go): a leader whose view
// of the servers is older than ours refuses the binary type unproposed
// (upgrade_pending), so the JSON one may go with the same request id.
func applyBinOrJSON[T any](ctx context.Context, s *Store, jsonType state.MessageType, payload any, bin func() ([]byte, error), requestID string) (T, uint64, error) {
	if s.clusterKnows(state.LogVersionTasksBin) {
		if cmd, err := bin(); err == nil {
			out, idx, err := applyCommand[T](ctx, s, cmd, requestID)
			if !errors.Is(err, state.ErrUpgradePending) {
				return out, idx, err
			}
		}
	}
	return applyTyped[T](ctx, s, jsonType, payload, requestID)
}
