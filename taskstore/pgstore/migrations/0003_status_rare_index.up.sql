-- Listings of the rare terminal statuses in id order (GET /v1/dlq, redrive of all,
-- GET /v1/tasks?status=failed) get an index without the succeeded tasks, in place of
-- fusebox_tasks_status_id, which held every terminal task: nearly every task succeeds, and
-- each result write added an entry to it (5 % of the database's CPU per task,
-- taskstore/pgstore/DESIGN.md). A listing of succeeded tasks walks the primary key in id
-- order instead, where nearly every row matches. No statement names either index, so the
-- release before this one gets the same plans from the new one.
--
-- Not CONCURRENTLY: golang-migrate holds its advisory lock while a migration runs, and a
-- concurrent build waits for every older snapshot, among them another node's wait for that
-- lock: a deadlock whenever nodes start together (TestConcurrentOpensMigrateOnce). The
-- build holds the table's SHARE lock, so writes wait for it (DESIGN.md, online-migration
-- policy).
CREATE INDEX IF NOT EXISTS fusebox_tasks_status_rare ON fusebox_tasks (status, id)
    WHERE status NOT IN ('pending', 'succeeded');
DROP INDEX IF EXISTS fusebox_tasks_status_id;
