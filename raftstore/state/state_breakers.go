package state

import (
	"encoding/json"
)

// Validate checks the command's shape (the FSM runs it too).
func (c *ForceBreakerCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	if err := CheckName("task_group", c.TaskGroup, true); err != nil {
		return err
	}
	if err := CheckName("namespace", c.NamespaceID, true); err != nil {
		return err
	}
	if err := CheckName("destination", c.Destination, true); err != nil {
		return err
	}
	switch c.Mode {
	case ForceOpen, ForceClosed:
		if !c.Until.IsZero() && !c.Until.After(c.At) {
			return invalidArg("until", "must be after the command time %s", c.At.Format("2006-01-02T15:04:05Z07:00"))
		}
	case ForceAuto:
		if !c.Until.IsZero() {
			return invalidArg("until", "must be empty for mode auto")
		}
	default:
		return invalidArg("mode", "must be open, closed or auto, got %q", c.Mode)
	}
	if len(c.Reason) > 1024 {
		return invalidArg("reason", "longer than 1024 bytes")
	}
	return nil
}

// applyForceBreaker writes (open/closed) or deletes (auto) the forced row and
// records the change in config_history under ForceBreakerHistoryKey.
func applyForceBreaker(w *writer, payload []byte) (any, *Error) {
	var c ForceBreakerCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	row := &ForcedBreaker{
		TaskGroup: c.TaskGroup, NamespaceID: c.NamespaceID, Destination: c.Destination,
		Mode: c.Mode, Until: c.Until, Reason: c.Reason, Index: w.index, Author: c.Author,
	}
	h := &HistoryEntry{
		Index: w.index, At: c.At, Author: c.Author, Op: OpSet,
		Key: ForceBreakerHistoryKey, Namespace: c.NamespaceID, Destination: c.Destination,
	}
	var result any = row
	if c.Mode == ForceAuto {
		h.Op = OpDelete
		result = nil
		if old := w.get(string(TableForcedBreakers), c.TaskGroup, c.NamespaceID, c.Destination); old != nil {
			if err := w.delete(string(TableForcedBreakers), old); err != nil {
				return nil, err
			}
		}
	} else if err := w.insert(string(TableForcedBreakers), row); err != nil {
		return nil, err
	}
	v, err := json.Marshal(row)
	if err != nil {
		return nil, &Error{Code: CodeInternal, Message: err.Error()}
	}
	h.Value = v
	if err := w.addHistory(h); err != nil {
		return nil, err
	}
	return result, nil
}
