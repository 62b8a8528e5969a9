-- Definitions are immutable: (key, version) never changes once written.
CREATE TABLE definitions (
    key         text        NOT NULL,
    version     integer     NOT NULL,
    checksum    text        NOT NULL,
    xml         text        NOT NULL,
    deployed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key, version),
    UNIQUE (key, checksum)
);

-- version is the step counter and half of the commit fence; owner/claimed_at
-- are the claim. A row with version 0 is a start whose first step has not
-- committed yet: only the start path may claim it.
CREATE TABLE instances (
    id                 text        PRIMARY KEY,
    definition_key     text        NOT NULL,
    definition_version integer     NOT NULL,
    status             text        NOT NULL,
    variables          jsonb       NOT NULL DEFAULT '{}',
    tokens             jsonb       NOT NULL DEFAULT '{}',
    version            bigint      NOT NULL DEFAULT 0,
    owner              text,
    claimed_at         timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (definition_key, definition_version) REFERENCES definitions (key, version)
);
CREATE INDEX instances_claimed_at ON instances (claimed_at) WHERE owner IS NOT NULL;

-- Relay message ids applied by a committed step (effectively-once).
CREATE TABLE inbox (
    message_id  text        PRIMARY KEY,
    instance_id text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_received_at ON inbox (received_at);

CREATE TABLE subscriptions (
    instance_id     text        NOT NULL,
    token_id        text        NOT NULL,
    element_id      text        NOT NULL,
    message_name    text        NOT NULL,
    correlation_key text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, token_id, element_id)
);
CREATE INDEX subscriptions_correlation ON subscriptions (message_name, correlation_key, created_at);

CREATE TABLE timers (
    id           bigserial   PRIMARY KEY,
    instance_id  text        NOT NULL,
    token_id     text        NOT NULL,
    element_id   text        NOT NULL,
    due_at       timestamptz NOT NULL,
    repeat       integer     NOT NULL DEFAULT 0,
    interval     text        NOT NULL DEFAULT '',
    attempts     integer     NOT NULL DEFAULT 0,
    locked_by    text,
    locked_until timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (instance_id, token_id, element_id)
);
CREATE INDEX timers_due_at ON timers (due_at);

CREATE TABLE tasks (
    id              bigserial   PRIMARY KEY,
    instance_id     text        NOT NULL,
    token_id        text        NOT NULL,
    element_id      text        NOT NULL,
    type            text        NOT NULL,
    retries         integer     NOT NULL,
    variables       jsonb       NOT NULL DEFAULT '{}',
    locked_by       text,
    lock_expires_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (instance_id, token_id, element_id)
);
CREATE INDEX tasks_type ON tasks (type, lock_expires_at);

CREATE TABLE outbox (
    id              text        PRIMARY KEY,
    instance_id     text        NOT NULL,
    message_name    text        NOT NULL,
    correlation_key text        NOT NULL DEFAULT '',
    variables       jsonb       NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    published_at    timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (created_at) WHERE published_at IS NULL;

CREATE TABLE incidents (
    id          bigserial   PRIMARY KEY,
    instance_id text        NOT NULL,
    token_id    text        NOT NULL,
    element_id  text        NOT NULL,
    code        text        NOT NULL,
    message     text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz
);
CREATE INDEX incidents_instance ON incidents (instance_id);
CREATE INDEX incidents_open ON incidents (created_at) WHERE resolved_at IS NULL;

-- Messages that arrived before their subscription opened, kept until expires_at.
CREATE TABLE buffered_messages (
    id              bigserial   PRIMARY KEY,
    message_id      text        NOT NULL UNIQUE,
    message_name    text        NOT NULL,
    correlation_key text        NOT NULL,
    variables       jsonb       NOT NULL DEFAULT '{}',
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX buffered_messages_correlation ON buffered_messages (message_name, correlation_key, created_at);
CREATE INDEX buffered_messages_expires_at ON buffered_messages (expires_at);

CREATE TABLE leases (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);

-- The commit fence. It runs first in the step's commit batch (one implicit
-- transaction); raising aborts every other write of the batch, so a fenced
-- step leaves nothing behind.
CREATE FUNCTION sutra_commit(p_id text, p_owner text, p_version bigint, p_status text,
                             p_variables jsonb, p_tokens jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE instances
       SET status = p_status, variables = p_variables, tokens = p_tokens,
           version = version + 1, owner = NULL, claimed_at = NULL, updated_at = now()
     WHERE id = p_id AND owner = p_owner AND version = p_version;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'instance % is not claimed by % at version %', p_id, p_owner, p_version
            USING ERRCODE = 'SU001';
    END IF;
    RETURN p_version + 1;
END
$$;
