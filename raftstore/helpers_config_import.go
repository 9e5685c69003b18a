package raftstore

import (
	"context"

	"fusebox/raftstore/state"
)

// ImportConfig applies an import from any node. The caller (the API) has
// validated and canonicalised every value; the command's shape is checked
// here too, before proposing.
func (s *Store) ImportConfig(ctx context.Context, c state.ImportConfigCommand) (state.ImportOutcome, uint64, error) {
	stamp(&c.CommandMeta)
	if err := c.Validate(); err != nil {
		return state.ImportOutcome{}, 0, err
	}
	return applyTyped[state.ImportOutcome](ctx, s, state.MsgImportConfig, c, c.RequestID)
}
