package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
)

// MessageType is the first byte of every command. The table is APPEND-ONLY:
// values are written into the raft log and snapshots outlive binaries, so a
// value is never renumbered or reused. Retire a type by leaving its line with a
// comment, and add new ones at the end.
type MessageType uint8

const (
	MsgSetConfig      MessageType = 1
	MsgDeleteConfig   MessageType = 2
	MsgPutEndpoint    MessageType = 3
	MsgDeleteEndpoint MessageType = 4
	MsgForceBreaker   MessageType = 5
	MsgSetShardCount  MessageType = 6
	// MsgPutShardMap (opaque shard-map blob) is retired: the FSM refuses
	// it. Use MsgCommitShardMap.
	MsgPutShardMap     MessageType = 7
	MsgSetClusterID    MessageType = 8
	MsgCommitShardMap  MessageType = 9
	MsgSetShardPin     MessageType = 10
	MsgReleaseShard    MessageType = 11
	MsgSetDrainingNode MessageType = 12
	// MsgSync is a no-op that marks a point in the log (Store.Sync).
	MsgSync MessageType = 13
	// MsgRejoin (RejoinCommand) never enters the log: the leader's
	// ApplyLocal turns it into a raft RemoveServer (rejoin.go).
	MsgRejoin MessageType = 14
	// MsgImportConfig (15) is declared in state_config_import.go.
	// 16–31: the task family, see commands_tasks.go and
	// commands_tasks_bin.go, commands_complete_multi.go and
	// commands_tasks_import.go (16–23 taken).

	// MsgSetConfigValue sets one config value as proposed: the proposer
	// validated and canonicalised it, and the FSM does not consult the key
	// registry (log version 2). It replaces MsgSetConfig, whose old entries
	// still apply as they did.
	MsgSetConfigValue MessageType = 32
	// Next: 33. Append only; 128–255 are the ignorable types (IgnorableFlag).
)

func (t MessageType) String() string {
	switch t {
	case MsgSetConfig:
		return "set_config"
	case MsgSetConfigValue:
		return "set_config_value"
	case MsgDeleteConfig:
		return "delete_config"
	case MsgPutEndpoint:
		return "put_endpoint"
	case MsgDeleteEndpoint:
		return "delete_endpoint"
	case MsgForceBreaker:
		return "force_breaker"
	case MsgSetShardCount:
		return "set_shard_count"
	case MsgPutShardMap:
		return "put_shard_map (retired)"
	case MsgSetClusterID:
		return "set_cluster_id"
	case MsgCommitShardMap:
		return "commit_shard_map"
	case MsgSetShardPin:
		return "set_shard_pin"
	case MsgReleaseShard:
		return "release_shard"
	case MsgSetDrainingNode:
		return "set_draining_node"
	case MsgSync:
		return "sync"
	case MsgRejoin:
		return "rejoin"
	case MsgImportConfig:
		return "import_config"
	case MsgSubmitTasks:
		return "submit_tasks"
	case MsgCompleteTasks:
		return "complete_tasks"
	case MsgRedriveTasks:
		return "redrive_tasks"
	case MsgCollectTasks:
		return "collect_tasks"
	case MsgSubmitTasksBin:
		return "submit_tasks_bin"
	case MsgCompleteTasksBin:
		return "complete_tasks_bin"
	case MsgCompleteTasksMulti:
		return "complete_tasks_multi"
	case MsgImportTasks:
		return "import_tasks"
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// CommandMeta is carried by every command. At is set by the proposer and is
// the only clock the FSM uses, so every replica writes identical rows.
type CommandMeta struct {
	At     time.Time `json:"at"`
	Author string    `json:"author,omitempty"`
	// RequestID is used by the Store's typed helpers as the dedup id (one is
	// generated if empty). It travels in the entry frame, not the payload.
	RequestID string `json:"-"`
}

// SetConfigCommand creates or replaces one dynamic-config entry.
type SetConfigCommand struct {
	CommandMeta
	Key         string          `json:"key"`
	Namespace   string          `json:"namespace,omitempty"`
	Destination string          `json:"destination,omitempty"`
	Value       json.RawMessage `json:"value"`
}

// DeleteConfigCommand removes one dynamic-config entry.
type DeleteConfigCommand struct {
	CommandMeta
	Key         string `json:"key"`
	Namespace   string `json:"namespace,omitempty"`
	Destination string `json:"destination,omitempty"`
}

// PutEndpointCommand creates or replaces a Nexus endpoint.
type PutEndpointCommand struct {
	CommandMeta
	Name        string `json:"name"`
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	// Health is optional; the proposer validates and canonicalises it
	// (ValidateEndpointHealth), and proposes it only once every server is
	// at LogVersionEndpointHealth (a build before it ignores the field).
	Health *EndpointHealth `json:"health,omitempty"`
}

// DeleteEndpointCommand removes a Nexus endpoint.
type DeleteEndpointCommand struct {
	CommandMeta
	Name string `json:"name"`
}

// Breaker force modes.
const (
	ForceOpen   = "open"
	ForceClosed = "closed"
	ForceAuto   = "auto" // clears the force: the breaker runs on its own again
)

// ForceBreakerCommand forces a breaker key open or closed cluster-wide, or
// back to auto. Until zero means until cleared.
type ForceBreakerCommand struct {
	CommandMeta
	TaskGroup   string    `json:"task_group"`
	NamespaceID string    `json:"namespace"`
	Destination string    `json:"destination"`
	Mode        string    `json:"mode"`
	Until       time.Time `json:"until,omitzero"`
	Reason      string    `json:"reason,omitempty"`
}

// SetShardCountCommand fixes the shard count. It may be set once; setting the
// same value again is a no-op, a different value is a conflict.
type SetShardCountCommand struct {
	CommandMeta
	Count int `json:"count"`
}

// SetClusterIDCommand names the cluster once; the first leader proposes it.
type SetClusterIDCommand struct {
	CommandMeta
	ClusterID string `json:"cluster_id"`
}

// ApplyResult is what the FSM returns for every command, and what a forwarded
// write returns over the wire. Exactly one of Value and Err is meaningful.
type ApplyResult struct {
	Value json.RawMessage `json:"value,omitempty"`
	Err   *Error          `json:"error,omitempty"`
	// Index is the raft index the command was applied at (the first apply
	// for a deduplicated retry); WaitForApplied(Index) gives read-your-writes.
	Index uint64 `json:"index,omitempty"`
	// Typed is Value before it was encoded, for the proposer on this node
	// (raftstore's applyCommand takes it instead of decoding Value: the
	// leader decoded every submit's 500 outcomes it had just encoded). Nil
	// for a deduplicated retry; never stored, snapshotted nor sent.
	Typed any `json:"-"`
}

// EncodeCommand builds a command: one type byte followed by the JSON payload.
func EncodeCommand(t MessageType, payload any) ([]byte, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 0, len(b)+1)
	out = append(out, byte(t))
	return append(out, b...), nil
}

// entryVersion is the first byte of a raft log entry written by this package:
// [entryVersion][uvarint len(requestID)][requestID][command].
const entryVersion byte = 1

// MaxRequestIDLen bounds request ids, which may come from untrusted callers.
const MaxRequestIDLen = 128

func EncodeEntry(cmd []byte, requestID string) []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen64+len(requestID)+len(cmd))
	out = append(out, entryVersion)
	out = binary.AppendUvarint(out, uint64(len(requestID)))
	out = append(out, requestID...)
	return append(out, cmd...)
}

func DecodeEntry(data []byte) (requestID string, t MessageType, payload []byte, err error) {
	if len(data) < 1 || data[0] != entryVersion {
		return "", 0, nil, fmt.Errorf("unsupported entry version")
	}
	n, w := binary.Uvarint(data[1:])
	if w <= 0 || n > MaxRequestIDLen || uint64(len(data)-1-w) < n {
		return "", 0, nil, fmt.Errorf("malformed request id")
	}
	rest := data[1+w:]
	requestID, rest = string(rest[:n]), rest[n:]
	if len(rest) < 1 {
		return "", 0, nil, fmt.Errorf("empty command")
	}
	return requestID, MessageType(rest[0]), rest[1:], nil
}

// ValidateCommand checks the framing of a command before it is proposed.
func ValidateCommand(cmd []byte, requestID string) *Error {
	if len(cmd) < 1 {
		return invalidArg("command", "empty command")
	}
	if len(requestID) > MaxRequestIDLen {
		return invalidArg("request_id", "longer than %d bytes", MaxRequestIDLen)
	}
	return nil
}
