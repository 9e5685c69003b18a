DROP INDEX CONCURRENTLY IF EXISTS fusebox_tasks_status_rare;
