-- The outbox publisher (issue 8). A row is published after the commit that
-- wrote it, leased to one replica's publisher at a time, and marked published
-- once the broker confirmed it.
--
-- target 'outbox': a BPMN message (throw event, message end event, send
--   task), published to SUTRA_OUTBOX_EXCHANGE with the message name as routing
--   key and the body {"message", "correlation_key", "variables"} (a valid relay).
-- target 'relay': an internal relay the worker sends itself (a task outcome,
--   a child instance's start or end), published to SUTRA_RELAY_EXCHANGE with
--   routing_key and body exactly as stored.
ALTER TABLE outbox
    ADD COLUMN seq          bigserial,
    ADD COLUMN element_id   text        NOT NULL DEFAULT '',
    ADD COLUMN target       text        NOT NULL DEFAULT 'outbox' CHECK (target IN ('outbox', 'relay')),
    ADD COLUMN routing_key  text        NOT NULL DEFAULT '',
    ADD COLUMN body         bytea,
    ADD COLUMN locked_by    text,
    ADD COLUMN locked_until timestamptz,
    ADD COLUMN attempts     integer     NOT NULL DEFAULT 0;

-- seq is commit order: one instance's steps commit one after another, and a
-- step's rows are inserted in the order the engine produced them.
CREATE UNIQUE INDEX outbox_seq ON outbox (seq);
DROP INDEX outbox_unpublished;
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_instance_unpublished ON outbox (instance_id, seq) WHERE published_at IS NULL;
CREATE INDEX outbox_published_at ON outbox (published_at) WHERE published_at IS NOT NULL;
