DROP TABLE IF EXISTS fusebox_tasks;
DROP TABLE IF EXISTS fusebox_shards;
