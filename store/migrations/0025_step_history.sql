-- The history of every instance's steps (issue 27): one row per committed
-- step, written in the step's own transaction by one multi-row insert for
-- every step of a commit, beside the inbox row. It names what advanced the
-- instance (a relay, a timer, a task outcome, an admin call), under which
-- owner, and, for a resume that counts them, the claim refusals it met
-- before it applied. The console reads an instance's rows by the primary
-- key, newest first; the sweeper trims rows older than
-- SUTRA_STEP_HISTORY_RETENTION.
CREATE TABLE step_history (
    instance_id  text        NOT NULL,
    -- version is the step counter the step committed (instances.version).
    version      bigint      NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    cause        text        NOT NULL,
    detail       text        NOT NULL DEFAULT '',
    owner        text        NOT NULL,
    -- message_id is the relay the step applied (its inbox row), if any.
    message_id   text,
    -- bounces counts the claim refusals of the resume before it applied;
    -- NULL when the resume carries no count (a relay, a single admin call).
    bounces      integer,
    PRIMARY KEY (instance_id, version)
);
-- The trim's index: rows are appended in commit order, so a BRIN index
-- finds the old ones for the cost of a summary per block range, where a
-- B-tree would cost every step one more index insert.
CREATE INDEX step_history_committed_at ON step_history USING brin (committed_at);
