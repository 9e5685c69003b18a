package node

import (
	"context"

	"fusebox/api"
	"fusebox/raftstore"
	"fusebox/taskstore/pgstore"
)

var _ api.TaskImporter = pgTaskAPI{}

// ImportTasks implements api.TaskImporter: tasks moved from another
// cluster keep their ids, attempts, next attempt and deadline; an error is
// a 503 and means none is known committed.
func (a pgTaskAPI) ImportTasks(ctx context.Context, ts []api.ImportedTask) ([]raftstore.SubmitOutcome, error) {
	if !a.pg.store.Ready() {
		return nil, a.unavailable("import refused", nil)
	}
	in := make([]pgstore.Imported, len(ts))
	for i, t := range ts {
		in[i] = pgstore.Imported{NewTask: t.NewTask, Attempts: t.Attempts, NextAttemptAt: t.NextAttemptAt, CreatedAt: t.CreatedAt}
	}
	out, err := a.pg.store.Import(ctx, in)
	if err != nil {
		return nil, a.unavailable("import not committed", err)
	}
	return out, nil
}
