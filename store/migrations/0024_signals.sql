-- Signals (issue 26).

-- The open signal waits of instances (catch, boundary and event subprocess
-- start events), written and closed by steps like message subscriptions.
-- id orders them: a broadcast reaches the rows up to the largest id it read
-- when it began, page by page, so an instance that subscribes after the
-- broadcast is not reached.
CREATE TABLE signal_subscriptions (
    id          bigserial   PRIMARY KEY,
    instance_id text        NOT NULL,
    token_id    text        NOT NULL,
    element_id  text        NOT NULL,
    signal_name text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (instance_id, token_id, element_id)
);
CREATE INDEX signal_subscriptions_name ON signal_subscriptions (signal_name, id);

-- Signal start events of every deployed version, written by the deploy: a
-- broadcast starts an instance of the latest version of each definition
-- that has one for its name.
CREATE TABLE signal_starts (
    signal_name        text    NOT NULL,
    definition_key     text    NOT NULL,
    definition_version integer NOT NULL,
    element_id         text    NOT NULL,
    PRIMARY KEY (definition_key, definition_version, element_id),
    FOREIGN KEY (definition_key, definition_version) REFERENCES definitions (key, version)
);
CREATE INDEX signal_starts_name ON signal_starts (signal_name);
