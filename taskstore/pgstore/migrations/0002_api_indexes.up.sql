-- Indexes of the API's reads (additive; issue 18 wiring).
-- Submit limits: pending tasks per (namespace, breaker destination).
CREATE INDEX IF NOT EXISTS fusebox_tasks_dest_pending ON fusebox_tasks
    (namespace_id, (CASE WHEN destination_key <> '' THEN destination_key ELSE destination END))
    WHERE status = 'pending';
-- Listings by status in id order (GET /v1/dlq) and redrive of all.
CREATE INDEX IF NOT EXISTS fusebox_tasks_status_id ON fusebox_tasks (status, id) WHERE status <> 'pending';
