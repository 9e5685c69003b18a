package tasks

import (
	"fusebox/raftstore/state"
)

// Imported is one pending task moved from another cluster (POST
// /v1/tasks:import): the task New built from the exported submit, with the
// id and deadline kept from the export (no backlog limits: the task was
// accepted once already), plus its attempts, next attempt and creation
// time. It is state.ImportedTask: the API builds it (api.ImportedTask),
// the Raft store proposes it (import_tasks) and the PostgreSQL store
// inserts it (pgstore.Imported): one struct, not a copy per package.
type Imported = state.ImportedTask
