// Package shardmap maps workflows to shards and shards to nodes.
//
// ShardOf hashes a (namespaceID, workflowID) pair to one of the cluster's
// fixed number of shards with a hash that never changes across releases. The
// Raft leader builds versioned Maps with New, Rebalance (a sticky,
// bounded-load placement over the live members: every member owns ⌊S/N⌋ or
// ⌈S/N⌉ shards, ranked by rendezvous hashing, with operator pins), Release
// (the admin "close") and Drain, and commits them; every node keeps the newest committed Map in a
// Holder and reads it without locks on the hot path. Each shard carries an
// epoch that increases whenever its owner changes; CheckEpoch refuses work
// from anyone but the current owner at the current epoch with a
// *WrongOwnerError.
//
// The package imports only the standard library. See DESIGN.md for the
// reasoning behind the hash, the placement and the epoch rule.
package shardmap
