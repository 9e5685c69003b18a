package state

import (
	"strconv"
)

// Log versions. A log version is a set of command types: every build knows
// the types of its own log version and of every one before it, and applies
// each exactly as the release that introduced it did. A node advertises its
// log version (gossip metadata, Member.LogVersion); a command type newer than
// the base is proposed only once every server in the raft configuration
// advertises a log version that has it (gate.go). A build meeting an entry it
// does not know halts (halt.go) instead of guessing.
const (
	// LogVersionBase is every command type that existed before log versions
	// were advertised (types 1–19). A member that advertises no log version
	// (an older build) is taken to be at the base.
	LogVersionBase = 1
	// LogVersionConfigValue adds set_config_value (32): a config value the
	// proposer validated and canonicalised, applied without the key registry.
	LogVersionConfigValue = 2
	// LogVersionEndpointHealth adds an endpoint's optional health check to
	// put_endpoint (3): no new type, but a build before it would drop the
	// field on apply and replicas would disagree, so the proposer refuses a
	// put_endpoint with health (upgrade_pending) below this version.
	LogVersionEndpointHealth = 3

	// ---- issue 17 §2: binary task commands (one block; renumber here at a merge) ----
	// LogVersionTasksBin adds submit_tasks_bin (20) and complete_tasks_bin
	// (21): the hot task commands in a binary payload (commands_tasks_bin.go).
	LogVersionTasksBin = 4
	// ---- end issue 17 §2 ----

	// ---- issue 17 §3: one entry for several shards' completes (one block; renumber here at a merge) ----
	// LogVersionCompleteMulti adds complete_tasks_multi (22): the completes
	// of several shards in one entry, each section fenced by its own epoch
	// (commands_complete_multi.go).
	LogVersionCompleteMulti = 5
	// ---- end issue 17 §3 ----

	// LogVersionImportTasks adds import_tasks (23): pending tasks moved from
	// another cluster with their ids and counters (commands_tasks_import.go).
	LogVersionImportTasks = 6

	// LogVersion is the newest log version this build knows.
	LogVersion = LogVersionImportTasks
)

// logVersionStamp, set with -ldflags "-X fusebox/raftstore/state.logVersionStamp=N",
// makes a build behave as one of log version N: it advertises N, proposes
// and applies only the types of N. Tests build a node "of an older release"
// this way; releases leave it empty.
var logVersionStamp string

// BuildLogVersion is the log version this binary runs at: LogVersion, or the
// stamp if one is set and valid (1..LogVersion).
func BuildLogVersion() int {
	if n, err := strconv.Atoi(logVersionStamp); err == nil && n >= LogVersionBase && n <= LogVersion {
		return n
	}
	return LogVersion
}

// IgnorableFlag is the high bit of a MessageType (Nomad's
// IgnoreUnknownTypeFlag): a build that does not know a type with this bit set
// skips the entry (an empty result, its request id remembered) instead of
// halting. Only a command whose effect no other command and no read depends
// on may carry it — an annotation, a statistic, a hint. None of the types
// 1–32 qualifies: each writes rows that later commands and reads depend on
// (even collect_tasks: a replica that skipped it would list tasks the others
// deleted), so none carries it. Types 128–255 are the ignorable ones.
const IgnorableFlag MessageType = 0x80

// Ignorable reports whether t carries IgnorableFlag.
func (t MessageType) Ignorable() bool { return t&IgnorableFlag != 0 }

// command is one line of the registration table.
type command struct {
	apply applyFunc
	// since is the log version that introduced the type.
	since int
}

// commands is the registration table of command types (Consul's
// fsm/commands pattern). Adding a type: append the constant to the
// MessageType table, add a log version (LogVersion+1) in this file, and add a
// line here with since = that version; then add its golden entry
// (golden_test.go, go test -run Golden -update).
var commands = map[MessageType]command{
	MsgSetConfig:       {applySetConfig, LogVersionBase},
	MsgDeleteConfig:    {applyDeleteConfig, LogVersionBase},
	MsgPutEndpoint:     {applyPutEndpoint, LogVersionBase},
	MsgDeleteEndpoint:  {applyDeleteEndpoint, LogVersionBase},
	MsgForceBreaker:    {applyForceBreaker, LogVersionBase},
	MsgSetShardCount:   {applySetShardCount, LogVersionBase},
	MsgPutShardMap:     {applyRetired, LogVersionBase},
	MsgSetClusterID:    {applySetClusterID, LogVersionBase},
	MsgCommitShardMap:  {applyCommitShardMap, LogVersionBase},
	MsgSetShardPin:     {applySetShardPin, LogVersionBase},
	MsgReleaseShard:    {applyReleaseShard, LogVersionBase},
	MsgSetDrainingNode: {applySetDrainingNode, LogVersionBase},
	MsgSync:            {applySync, LogVersionBase},
	MsgImportConfig:    {applyImportConfig, LogVersionBase},
	MsgSubmitTasks:     {applySubmitTasks, LogVersionBase},
	MsgCompleteTasks:   {applyCompleteTasks, LogVersionBase},
	MsgRedriveTasks:    {applyRedriveTasks, LogVersionBase},
	MsgCollectTasks:    {applyCollectTasks, LogVersionBase},
	MsgSetConfigValue:  {applySetConfigValue, LogVersionConfigValue},

	// ---- issue 17 §2: LogVersionTasksBin ----
	MsgSubmitTasksBin:   {applySubmitTasksBin, LogVersionTasksBin},
	MsgCompleteTasksBin: {applyCompleteTasksBin, LogVersionTasksBin},
	// ---- end issue 17 §2 ----

	// ---- issue 17 §3: LogVersionCompleteMulti ----
	MsgCompleteTasksMulti: {applyCompleteTasksMulti, LogVersionCompleteMulti},
	// ---- end issue 17 §3 ----

	MsgImportTasks: {applyImportTasks, LogVersionImportTasks},
}

// lookupCommand returns t's apply function if a build at logVersion knows t.
func lookupCommand(t MessageType, logVersion int) (applyFunc, bool) {
	c, ok := commands[t]
	if !ok || c.since > logVersion {
		return nil, false
	}
	return c.apply, true
}

// CommandSince is the log version that introduced t (0: unknown to this
// build).
func CommandSince(t MessageType) int {
	return commands[t].since
}

// applySync applies the no-op of Store.Sync: the entry's index is the point.
func applySync(*writer, []byte) (any, *Error) { return nil, nil }
