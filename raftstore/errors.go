package raftstore

import (
	"fmt"

	"fusebox/raftstore/state"
)

// The typed error of every write is state.Error (its codes are package
// errcode's); these build the ones the node itself refuses with.

func invalidArg(field, format string, args ...any) *state.Error {
	return &state.Error{Code: state.CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

func unavailable(format string, args ...any) *state.Error {
	return &state.Error{Code: state.CodeUnavailable, Message: fmt.Sprintf(format, args...)}
}
