DROP INDEX IF EXISTS fusebox_tasks_status_id;
DROP INDEX IF EXISTS fusebox_tasks_dest_pending;
