// Package errcode is fusebox's one table of error codes: the machine-readable
// code every typed error carries across the wire (a forwarded Raft write, an
// API answer) and is rebuilt from on the other side, so callers match codes
// with errors.Is and never message text.
//
// It holds the codes and what they mean to a caller (may the same request be
// sent again?), nothing more: it imports no transport. The HTTP status of
// each code is the API's business (api/errors.go maps them, and a test
// there holds that map to this table and to docs/api.md).
//
// Codes are part of the external contract: append, never rename or reuse.
package errcode

import "slices"

const (
	InvalidArgument  = "invalid_argument"   // bad input; nothing was written
	Unauthenticated  = "unauthenticated"    // no token, or one the node does not know
	PermissionDenied = "permission_denied"  // a known token whose role does not cover the route
	NotFound         = "not_found"          // unknown key, endpoint, shard, task or route
	MethodNotAllowed = "method_not_allowed" // a known path with another method
	Conflict         = "conflict"           // the request contradicts the stored state
	WrongOwner       = "wrong_owner"        // a shard write or operation with a stale epoch
	UpgradePending   = "upgrade_pending"    // a command type some voter's build does not know yet
	TooLarge         = "payload_too_large"  // a body over the limit
	Overloaded       = "resource_exhausted" // overloaded; retry after Retry-After
	NotLeader        = "not_leader"         // this node is not the Raft leader
	NoLeader         = "no_leader"          // no Raft leader within the hold timeout
	Unavailable      = "unavailable"        // a dependency is unreachable or the cluster is in transition
	Internal         = "internal"           // a bug
)

// info is one row of the table.
type info struct {
	// retryable: the same request (with the same request id) may be sent
	// again as it is; the cluster was in transition, the request was fine.
	retryable bool
}

var table = map[string]info{
	InvalidArgument:  {},
	Unauthenticated:  {},
	PermissionDenied: {},
	NotFound:         {},
	MethodNotAllowed: {},
	Conflict:         {},
	WrongOwner:       {},
	UpgradePending:   {},
	TooLarge:         {},
	Overloaded:       {retryable: true},
	NotLeader:        {retryable: true},
	NoLeader:         {retryable: true},
	Unavailable:      {retryable: true},
	Internal:         {},
}

// Known reports whether code is in the table.
func Known(code string) bool {
	_, ok := table[code]
	return ok
}

// Retryable reports whether a request refused with code may be sent again
// unchanged. Unknown codes are not.
func Retryable(code string) bool { return table[code].retryable }

// All lists every code, sorted.
func All() []string {
	out := make([]string, 0, len(table))
	for c := range table {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}
