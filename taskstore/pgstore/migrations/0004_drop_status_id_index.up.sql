-- fusebox_tasks_status_id held every terminal task, so every result write added an entry
-- to it (5 % of the database's CPU per task, taskstore/pgstore/DESIGN.md). No statement
-- names it: the planner uses fusebox_tasks_status_rare (migration 3) for what it served,
-- in this release and the one before, so dropping it is backward compatible.
DROP INDEX CONCURRENTLY IF EXISTS fusebox_tasks_status_id;
