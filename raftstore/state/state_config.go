package state

import "encoding/json"

func (c *SetConfigCommand) Validate(v Validator) (json.RawMessage, *Error) {
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	if err := CheckName("key", c.Key, true); err != nil {
		return nil, err
	}
	if err := CheckName("namespace", c.Namespace, false); err != nil {
		return nil, err
	}
	if err := CheckName("destination", c.Destination, false); err != nil {
		return nil, err
	}
	if len(c.Value) == 0 || !json.Valid(c.Value) {
		return nil, invalidArg("value", "must be valid JSON")
	}
	if v == nil {
		return c.Value, nil
	}
	canonical, err := v.Validate(c.Key, c.Namespace, c.Destination, c.Value)
	if err != nil {
		return nil, validatorError(err)
	}
	if len(canonical) == 0 || !json.Valid(canonical) {
		return nil, &Error{Code: CodeInternal, Field: "value", Message: "validator returned invalid canonical JSON"}
	}
	return canonical, nil
}

// applySetConfig applies the legacy set_config (type 1): its entries were
// written to be validated by the applying replica's key registry, and still
// are, so they apply as they did. New writes go as set_config_value.
func applySetConfig(w *writer, payload []byte) (any, *Error) {
	var c SetConfigCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	value, verr := c.Validate(w.s.validator)
	if verr != nil {
		return nil, verr
	}
	return writeConfig(w, &c, value)
}

// applySetConfigValue applies set_config_value (type 32): the value as the
// proposer validated and canonicalised it. Only the command's shape is
// checked, so the outcome depends on the log alone, never on the keys this
// binary registers.
func applySetConfigValue(w *writer, payload []byte) (any, *Error) {
	var c SetConfigCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	value, verr := c.Validate(nil)
	if verr != nil {
		return nil, verr
	}
	return writeConfig(w, &c, value)
}

func writeConfig(w *writer, c *SetConfigCommand, value []byte) (any, *Error) {
	e := &ConfigEntry{
		Key: c.Key, Namespace: c.Namespace, Destination: c.Destination,
		Value: value, Index: w.index, UpdatedAt: c.At, Author: c.Author,
	}
	w.it.putConfig(e)
	if err := w.addHistory(&HistoryEntry{
		Index: w.index, At: c.At, Author: c.Author, Op: OpSet,
		Key: c.Key, Namespace: c.Namespace, Destination: c.Destination, Value: value,
	}); err != nil {
		return nil, err
	}
	if configEntryPlain(e) {
		return configEntryJSON{e}, nil
	}
	return e, nil
}

func applyDeleteConfig(w *writer, payload []byte) (any, *Error) {
	var c DeleteConfigCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	if err := CheckName("key", c.Key, true); err != nil {
		return nil, err
	}
	old := w.it.configRow(c.Key, c.Namespace, c.Destination)
	if old == nil {
		return nil, notFound("config %q (namespace %q, destination %q) does not exist", c.Key, c.Namespace, c.Destination)
	}
	w.it.deleteConfig(old)
	if err := w.addHistory(&HistoryEntry{
		Index: w.index, At: c.At, Author: c.Author, Op: OpDelete,
		Key: c.Key, Namespace: c.Namespace, Destination: c.Destination,
	}); err != nil {
		return nil, err
	}
	return nil, nil
}
