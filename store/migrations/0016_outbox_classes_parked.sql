-- Outbox order per class, and parked rows (issue 23). An instance's rows are
-- published in commit order within their target: relays the worker sends
-- itself ('relay': task outcomes, a child's start or end) among relays, BPMN
-- messages ('outbox') among BPMN messages, so that a message nobody is bound
-- to never holds the relay that advances its instance. The probes of an
-- instance's unpublished rows name the class; the index keeps its name (the
-- plan checks name it) and gains target.
DROP INDEX outbox_instance_unpublished;
CREATE INDEX outbox_instance_unpublished ON outbox (instance_id, target, seq) WHERE published_at IS NULL;

-- A BPMN message the broker kept returning (no queue bound for its name)
-- after SUTRA_OUTBOX_MAX_ATTEMPTS is moved here by its publisher's
-- settlement: out of the outbox's order, so that it no longer holds the
-- instance's later messages, and kept until an operator retries it (back to
-- the outbox with a new seq, behind every row written since) or discards it.
CREATE TABLE outbox_parked (
    id              text        PRIMARY KEY,
    seq             bigint      NOT NULL,
    instance_id     text        NOT NULL,
    element_id      text        NOT NULL,
    target          text        NOT NULL,
    message_name    text        NOT NULL,
    correlation_key text        NOT NULL,
    variables       jsonb       NOT NULL,
    routing_key     text        NOT NULL,
    body            bytea,
    attempts        integer     NOT NULL,
    created_at      timestamptz NOT NULL,
    parked_at       timestamptz NOT NULL DEFAULT now(),
    code            text        NOT NULL,
    reason          text        NOT NULL
);
CREATE INDEX outbox_parked_instance ON outbox_parked (instance_id, id);
