-- Listings of the rare terminal statuses in id order (GET /v1/dlq, redrive of all,
-- GET /v1/tasks?status=failed): the same (status, id) order as fusebox_tasks_status_id,
-- without the succeeded tasks, so a task that succeeds (nearly every task) adds no entry
-- here. A listing of succeeded tasks walks the primary key in id order instead, where
-- nearly every row matches. One statement: CONCURRENTLY cannot run in a transaction, and
-- it builds the index while the nodes keep writing (DESIGN.md, online-migration policy).
CREATE INDEX CONCURRENTLY IF NOT EXISTS fusebox_tasks_status_rare ON fusebox_tasks (status, id)
    WHERE status NOT IN ('pending', 'succeeded');
