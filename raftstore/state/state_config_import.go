package state

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// MsgImportConfig replaces every value of a set of config keys in one entry
// (fusebox admin config import). Appended to the table in commands.go.
const MsgImportConfig MessageType = 15

// OpImport is the config_history op of an import: one history row per
// import (the history is keyed by raft index), its Value the outcome.
const OpImport = "import"

// MaxImportEntries bounds the values of one import (one Raft entry).
const MaxImportEntries = 1000

// ImportConfigCommand makes Entries the only values of each key in Keys:
// values of those keys not in Entries are deleted, new or changed ones set,
// equal ones left alone (no write, no history). Keys not listed are not
// touched. The proposer validates and canonicalises every value first
// (dynconfig.ParseFile); the FSM checks only the command's shape, so its
// outcome depends on the log alone, not on the keys this binary registers.
type ImportConfigCommand struct {
	CommandMeta
	Keys    []string      `json:"keys"`
	Entries []ConfigEntry `json:"entries"`
}

// ConfigRef names one config value.
type ConfigRef struct {
	Key         string `json:"key"`
	Namespace   string `json:"namespace,omitempty"`
	Destination string `json:"destination,omitempty"`
}

// ImportOutcome says what an import changed (or, planned, would change).
type ImportOutcome struct {
	Set       []ConfigEntry `json:"set"`
	Deleted   []ConfigRef   `json:"deleted"`
	Unchanged int           `json:"unchanged"`
}

func (c *ImportConfigCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	if len(c.Keys) == 0 {
		return invalidArg("keys", "at least one key is required")
	}
	if len(c.Keys) > MaxImportEntries {
		return invalidArg("keys", "%d keys exceeds the limit of %d", len(c.Keys), MaxImportEntries)
	}
	if len(c.Entries) > MaxImportEntries {
		return invalidArg("entries", "%d values exceeds the limit of %d per import", len(c.Entries), MaxImportEntries)
	}
	keys := make(map[string]bool, len(c.Keys))
	for i, k := range c.Keys {
		if err := CheckName(fmt.Sprintf("keys[%d]", i), k, true); err != nil {
			return err
		}
		if keys[k] {
			return invalidArg(fmt.Sprintf("keys[%d]", i), "key %q listed twice", k)
		}
		keys[k] = true
	}
	seen := make(map[ConfigRef]bool, len(c.Entries))
	for i, e := range c.Entries {
		f := fmt.Sprintf("entries[%d].", i)
		if !keys[e.Key] {
			return invalidArg(f+"key", "key %q is not in keys", e.Key)
		}
		if err := CheckName(f+"namespace", e.Namespace, false); err != nil {
			return err
		}
		if err := CheckName(f+"destination", e.Destination, false); err != nil {
			return err
		}
		if v := bytes.TrimSpace(e.Value); len(v) == 0 || !json.Valid(v) || string(v) == "null" {
			return invalidArg(f+"value", "must be a JSON value other than null")
		}
		r := ConfigRef{e.Key, e.Namespace, e.Destination}
		if seen[r] {
			return invalidArg(f+"key", "%q (namespace %q, destination %q) given twice", e.Key, e.Namespace, e.Destination)
		}
		seen[r] = true
	}
	return nil
}

// PlanConfigImport is what c does to a config table holding current: the
// FSM applies exactly this plan, and a dry run shows it. Pure.
func PlanConfigImport(current []ConfigEntry, c ImportConfigCommand) ImportOutcome {
	keys := make(map[string]bool, len(c.Keys))
	for _, k := range c.Keys {
		keys[k] = true
	}
	want := make(map[ConfigRef]json.RawMessage, len(c.Entries))
	for _, e := range c.Entries {
		want[ConfigRef{e.Key, e.Namespace, e.Destination}] = e.Value
	}
	out := ImportOutcome{Set: []ConfigEntry{}, Deleted: []ConfigRef{}}
	have := make(map[ConfigRef]bool)
	for _, e := range current {
		if !keys[e.Key] {
			continue
		}
		r := ConfigRef{e.Key, e.Namespace, e.Destination}
		have[r] = true
		switch v, ok := want[r]; {
		case !ok:
			out.Deleted = append(out.Deleted, r)
		case bytes.Equal(v, e.Value):
			out.Unchanged++
		default:
			out.Set = append(out.Set, ConfigEntry{Key: e.Key, Namespace: e.Namespace, Destination: e.Destination, Value: v})
		}
	}
	for _, e := range c.Entries {
		if !have[ConfigRef{e.Key, e.Namespace, e.Destination}] {
			out.Set = append(out.Set, ConfigEntry{Key: e.Key, Namespace: e.Namespace, Destination: e.Destination, Value: e.Value})
		}
	}
	slices.SortFunc(out.Set, func(a, b ConfigEntry) int {
		return cmpRef(ConfigRef{a.Key, a.Namespace, a.Destination}, ConfigRef{b.Key, b.Namespace, b.Destination})
	})
	slices.SortFunc(out.Deleted, cmpRef)
	return out
}

func cmpRef(a, b ConfigRef) int {
	return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Destination, b.Destination))
}

func applyImportConfig(w *writer, payload []byte) (any, *Error) {
	var c ImportConfigCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	plan := PlanConfigImport(w.it.configRows(), c)
	for _, r := range plan.Deleted {
		if old := w.it.configRow(r.Key, r.Namespace, r.Destination); old != nil {
			w.it.deleteConfig(old)
		}
	}
	for i := range plan.Set {
		e := &plan.Set[i]
		e.Index, e.UpdatedAt, e.Author = w.index, c.At, c.Author
		row := *e
		w.it.putConfig(&row)
	}
	summary, _ := json.Marshal(struct {
		Keys      []string `json:"keys"`
		Set       int      `json:"set"`
		Deleted   int      `json:"deleted"`
		Unchanged int      `json:"unchanged"`
	}{c.Keys, len(plan.Set), len(plan.Deleted), plan.Unchanged})
	if err := w.addHistory(&HistoryEntry{
		Index: w.index, At: c.At, Author: c.Author, Op: OpImport, Key: fmt.Sprintf("(%d keys)", len(c.Keys)), Value: summary,
	}); err != nil {
		return nil, err
	}
	return plan, nil
}
