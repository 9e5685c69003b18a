package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"fusebox/dynconfig"
	"fusebox/raftstore/state"
)

// configImporter is the part of the store the import route needs
// (*raftstore.Store); a store without it serves no import route.
type configImporter interface {
	ImportConfig(ctx context.Context, c state.ImportConfigCommand) (state.ImportOutcome, uint64, error)
}

// ConfigImport is the body of POST /v1/config:import.
type ConfigImport struct {
	// File is the text of a Temporal dynamic-config YAML file.
	File string `json:"file"`
	// DryRun validates and reports what would change, against this node's
	// replica, without writing.
	DryRun bool `json:"dry_run,omitempty"`
}

// ConfigImportResult answers an import: what changed (or would change),
// and the keys fusebox does not know, which were not applied.
type ConfigImportResult struct {
	DryRun bool `json:"dry_run,omitempty"`
	// Index is the raft index of the import (0: dry run, or nothing to do).
	Index uint64 `json:"index,omitempty"`
	// Keys are the registered keys the file replaced.
	Keys      []string               `json:"keys"`
	Set       []ConfigEntry          `json:"set"`
	Deleted   []state.ConfigRef      `json:"deleted"`
	Unchanged int                    `json:"unchanged"`
	Unknown   []dynconfig.UnknownKey `json:"unknown_keys"`
}

// configImport reads a Temporal dynamic-config file, validates every value
// (any problem refuses the whole file: 400 naming key, index and line) and
// applies it as one Raft entry: every value of each registered key in the
// file is replaced by the file's. Unknown keys are reported, not applied.
func (s *Server) configImport(w http.ResponseWriter, r *http.Request, imp configImporter) error {
	var in ConfigImport
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	if in.File == "" {
		return BadField("file", "required: the text of a Temporal dynamic config YAML file")
	}
	f, err := dynconfig.ParseFile([]byte(in.File))
	if err != nil {
		var fe *dynconfig.FileError
		if errors.As(err, &fe) && len(fe.Problems) > 0 {
			p := fe.Problems[0]
			field := "file"
			if p.Key != "" && p.Index >= 0 {
				field = fmt.Sprintf("[%d]", p.Index)
				if p.Field != "" {
					field += "." + p.Field
				}
			} else if p.Field != "" {
				field = p.Field
			}
			return &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Key: p.Key, Field: field, Message: fe.Error()}
		}
		return BadField("file", "%v", err)
	}
	out := ConfigImportResult{DryRun: in.DryRun, Keys: f.Keys, Set: []ConfigEntry{}, Deleted: []state.ConfigRef{},
		Unknown: f.Unknown}
	if out.Keys == nil {
		out.Keys = []string{}
	}
	if out.Unknown == nil {
		out.Unknown = []dynconfig.UnknownKey{}
	}
	if len(f.Keys) == 0 {
		writeJSON(w, http.StatusOK, out) // only unknown keys: nothing to apply
		return nil
	}
	cmd := state.ImportConfigCommand{CommandMeta: s.meta(r), Keys: f.Keys}
	for _, v := range f.Values {
		cmd.Entries = append(cmd.Entries, state.ConfigEntry{Key: v.Key, Namespace: v.Namespace, Destination: v.Destination, Value: v.Value})
	}
	var res state.ImportOutcome
	if in.DryRun {
		res = state.PlanConfigImport(s.deps.State.Config(), cmd)
	} else {
		var idx uint64
		res, idx, err = imp.ImportConfig(r.Context(), cmd)
		if err != nil {
			return err
		}
		s.waitApplied(r.Context(), idx)
		out.Index = idx
	}
	for _, e := range res.Set {
		out.Set = append(out.Set, toConfigEntry(e))
	}
	out.Deleted = append(out.Deleted, res.Deleted...)
	out.Unchanged = res.Unchanged
	writeJSON(w, http.StatusOK, out)
	return nil
}
