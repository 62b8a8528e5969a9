-- Bulk migrations (issue 9): POST /v1/migrations moves every active instance
-- of one definition version to another through the single-instance
-- migration. The job survives the replica that runs it: it is leased like a
-- timer, and another replica resumes it when the lease lapses.
CREATE TABLE migrations (
    id             text        PRIMARY KEY,
    definition_key text        NOT NULL,
    from_version   integer     NOT NULL,
    to_version     integer     NOT NULL,
    mapping        jsonb       NOT NULL DEFAULT '{}',
    state          text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done')),
    locked_by      text,
    locked_until   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX migrations_running ON migrations (created_at) WHERE state = 'running';

-- One row per instance the job moves: pending until migrated or refused; a
-- refused claim (held by a step) is retried later with backoff, never
-- waited on.
CREATE TABLE migration_items (
    migration_id text        NOT NULL REFERENCES migrations (id),
    instance_id  text        NOT NULL,
    state        text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'migrated', 'refused')),
    attempts     integer     NOT NULL DEFAULT 0,
    next_at      timestamptz NOT NULL DEFAULT now(),
    code         text,
    detail       text,
    PRIMARY KEY (migration_id, instance_id)
);
CREATE INDEX migration_items_pending ON migration_items (migration_id, next_at) WHERE state = 'pending';
