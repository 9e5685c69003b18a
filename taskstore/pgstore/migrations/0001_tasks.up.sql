-- Tasks of the postgres task store. Portable to CockroachDB and YugabyteDB:
-- plain tables, a partial index, no advisory locks, no triggers.
CREATE TABLE IF NOT EXISTS fusebox_shards (
    shard integer PRIMARY KEY,
    epoch bigint NOT NULL,
    owner text NOT NULL DEFAULT ''
);

CREATE TABLE IF NOT EXISTS fusebox_tasks (
    id text PRIMARY KEY,
    shard integer NOT NULL,
    namespace_id text NOT NULL,
    workflow_id text NOT NULL,
    task_group text NOT NULL,
    destination text NOT NULL,
    destination_key text NOT NULL DEFAULT '',
    request_id text,
    request bytea NOT NULL,
    status text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    blocked integer NOT NULL DEFAULT 0,
    unexpected integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    deadline timestamptz,
    schedule_to_close_ns bigint NOT NULL DEFAULT 0,
    completed_at timestamptz,
    message text NOT NULL DEFAULT '',
    http_status integer NOT NULL DEFAULT 0,
    operation_id text NOT NULL DEFAULT '',
    output bytea,
    attempt_epoch bigint NOT NULL DEFAULT 0
);

-- Idempotent submit: NULL request ids never conflict.
CREATE UNIQUE INDEX IF NOT EXISTS fusebox_tasks_request ON fusebox_tasks (namespace_id, request_id);
-- The shard readers' paging: pending tasks of a shard by due time.
CREATE INDEX IF NOT EXISTS fusebox_tasks_due ON fusebox_tasks (shard, next_attempt_at, id) WHERE status = 'pending';
-- DLQ listing and retention.
CREATE INDEX IF NOT EXISTS fusebox_tasks_terminal ON fusebox_tasks (status, completed_at) WHERE status <> 'pending';
