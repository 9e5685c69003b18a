CREATE INDEX IF NOT EXISTS fusebox_tasks_status_id ON fusebox_tasks (status, id) WHERE status <> 'pending';
DROP INDEX IF EXISTS fusebox_tasks_status_rare;
