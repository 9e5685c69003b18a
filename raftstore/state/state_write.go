package state

import (
	"encoding/json"
	"errors"

	"github.com/hashicorp/go-memdb"
)

// writer is one FSM write transaction at one raft index. All apply functions
// take their time from the command, never from the local clock.
type writer struct {
	s     *State
	txn   *memdb.Txn
	tasks *taskTable  // the writable version of the task table (clone of the published one)
	it    *sideTables // the writable version of requests and counters (likewise)
	index uint64
}

func (w *writer) insert(table string, obj any) *Error {
	if err := w.txn.Insert(table, obj); err != nil {
		return &Error{Code: CodeInternal, Message: "insert " + table + ": " + err.Error()}
	}
	return nil
}

func (w *writer) delete(table string, obj any) *Error {
	if err := w.txn.Delete(table, obj); err != nil {
		return &Error{Code: CodeInternal, Message: "delete " + table + ": " + err.Error()}
	}
	return nil
}

func (w *writer) get(table string, args ...any) any {
	o, err := w.txn.First(table, "id", args...)
	if err != nil {
		return nil
	}
	return o
}

// DecodePayload decodes a command payload; a bad payload is the proposer's
// fault and is reported as invalid_argument.
func DecodePayload(payload []byte, v any) *Error {
	if err := json.Unmarshal(payload, v); err != nil {
		return invalidArg("command", "malformed payload: %v", err)
	}
	return nil
}

func checkMeta(m CommandMeta) *Error {
	if m.At.IsZero() {
		return invalidArg("at", "required: the proposer sets the command time")
	}
	if len(m.Author) > 256 {
		return invalidArg("author", "longer than 256 bytes")
	}
	return nil
}

// CheckName validates a free-form identifier component (config key, namespace,
// destination, task group): bounded, no NUL (the index separator), no control
// characters.
func CheckName(field, v string, required bool) *Error {
	if v == "" {
		if required {
			return invalidArg(field, "required")
		}
		return nil
	}
	if len(v) > 256 {
		return invalidArg(field, "longer than 256 bytes")
	}
	if hasControlChar(v) {
		return invalidArg(field, "contains control characters")
	}
	return nil
}

// addHistory appends to config_history and trims it to the history limit,
// oldest first. The length lives in the counters table so trimming is
// deterministic and O(1) per write.
func (w *writer) addHistory(h *HistoryEntry) *Error {
	w.it.putHistory(h)
	n := w.it.counter(counterHistory) + 1
	for n > w.s.historyLimit && w.it.popHistory() {
		n--
	}
	w.it.setCounter(counterHistory, n)
	return nil
}

// validatorError turns a Validator's error into invalid_argument, keeping the
// field if the validator named one.
func validatorError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Code == CodeInvalidArgument {
			return e
		}
		return invalidArg(e.Field, "%s", e.Message)
	}
	var fe interface{ FieldName() string }
	if errors.As(err, &fe) {
		return invalidArg(fe.FieldName(), "%v", err)
	}
	return invalidArg("value", "%v", err)
}

// hasControlChar reports whether s holds a control character (U+0000–U+001F,
// U+007F). A byte scan, not a rune scan: every such character is one ASCII
// byte, and UTF-8 (valid or not) never hides an ASCII byte inside another
// character, so it answers exactly as strings.ContainsFunc over the runes
// did (TestHasControlCharMatchesRunes), at a fraction of the cost on the
// apply path (every name of every task is checked on every replica).
func hasControlChar(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
