package node

import (
	"context"

	"fusebox/api"
	"fusebox/raftstore/state"
)

// ImportTasks is api.TaskService's on the postgres store: tasks moved from
// another cluster keep their ids, attempts, next attempt and deadline; an
// error is a 503 and means none is known committed.
func (a pgTaskAPI) ImportTasks(ctx context.Context, ts []api.ImportedTask) ([]state.SubmitOutcome, error) {
	if !a.pg.usable() {
		return nil, a.unavailable("import refused", nil)
	}
	out, err := a.pg.store.Import(ctx, ts) // both are tasks.Imported
	if err != nil {
		return nil, a.unavailable("import not committed", err)
	}
	return out, nil
}
