-- Batch operations (issue 40): POST /v1/batches cancels, retries the
-- incidents of, or migrates the instances the instance list's filter
-- matches, or those named. Nothing lists the instances up front: the runner
-- walks the filter by keyset a page at a time (walked_to, the last instance
-- id handled), so a batch over a million instances holds one page in
-- memory and one row here. It is leased like a bulk migration: one replica
-- works it, another resumes it from walked_to when the lease lapses.
CREATE TABLE batches (
    id             text        PRIMARY KEY,
    operation      text        NOT NULL CHECK (operation IN ('cancel', 'retry', 'migrate')),
    filter         jsonb,
    ids            text[],
    target_version integer,
    mapping        jsonb       NOT NULL DEFAULT '{}',
    state          text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done')),
    walked_to      text        NOT NULL DEFAULT '',
    walk_done      boolean     NOT NULL DEFAULT false,
    done           bigint      NOT NULL DEFAULT 0,
    failed         bigint      NOT NULL DEFAULT 0,
    refused        jsonb       NOT NULL DEFAULT '{}',
    locked_by      text,
    locked_until   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((filter IS NULL) <> (ids IS NULL))
);
CREATE INDEX batches_running ON batches (created_at) WHERE state = 'running';

-- The instances of a batch whose claim was held (or whose step the lanes
-- put off): tried again at next_at, with backoff, never waited on.
CREATE TABLE batch_retries (
    batch_id    text        NOT NULL REFERENCES batches (id),
    instance_id text        NOT NULL,
    attempts    integer     NOT NULL,
    next_at     timestamptz NOT NULL,
    PRIMARY KEY (batch_id, instance_id)
);
CREATE INDEX batch_retries_due ON batch_retries (batch_id, next_at);

-- An incident of a task that failed with no retries left keeps what its
-- worker reported (errorMessage, errorDetails: a stack trace), for the
-- operator; NULL for other incidents.
ALTER TABLE incidents ADD COLUMN error_message text, ADD COLUMN error_details text;
