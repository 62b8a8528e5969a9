-- What the wider BPMN coverage (issue 12) needs from the store.

-- Message start events of every deployed version, written by the deploy: a
-- relay whose message name is here starts an instance of the latest version
-- of each definition that has it.
CREATE TABLE message_starts (
    message_name       text    NOT NULL,
    definition_key     text    NOT NULL,
    definition_version integer NOT NULL,
    element_id         text    NOT NULL,
    PRIMARY KEY (definition_key, definition_version, element_id),
    FOREIGN KEY (definition_key, definition_version) REFERENCES definitions (key, version)
);
CREATE INDEX message_starts_name ON message_starts (message_name);

-- An instance started by a message with a correlation key holds that key
-- while it is active: at most one active instance of a definition per key.
-- A child instance names its parent (cancelling the parent cancels it).
ALTER TABLE instances
    ADD COLUMN start_correlation_key text,
    ADD COLUMN parent_id             text;
CREATE UNIQUE INDEX instances_active_start_key ON instances (definition_key, start_correlation_key)
    WHERE status = 'active' AND start_correlation_key IS NOT NULL;
CREATE INDEX instances_parent ON instances (parent_id) WHERE parent_id IS NOT NULL;

-- A message-start relay refused because an instance with its key is active
-- waits here (with its ttl) for that instance to end.
ALTER TABLE buffered_messages ADD COLUMN start_definition text;
CREATE INDEX buffered_messages_start ON buffered_messages (start_definition, correlation_key, id)
    WHERE start_definition IS NOT NULL;

-- User tasks: what humans' tools list and filter on.
ALTER TABLE tasks
    ADD COLUMN user_task        boolean NOT NULL DEFAULT false,
    ADD COLUMN assignee         text,
    ADD COLUMN candidate_groups text[]  NOT NULL DEFAULT '{}',
    ADD COLUMN candidate_users  text[]  NOT NULL DEFAULT '{}',
    ADD COLUMN form_key         text,
    ADD COLUMN form_id          text,
    ADD COLUMN due_date         text,
    ADD COLUMN follow_up_date   text;
CREATE INDEX tasks_user ON tasks (id) WHERE user_task;
CREATE INDEX tasks_assignee ON tasks (assignee) WHERE user_task;

-- The commit of a step that ends an instance started under a correlation key
-- releases the oldest message-start relay buffered for that definition and
-- key: it goes to the relay exchange through the outbox, in the same
-- transaction, and starts the next instance.
-- Both take a transaction-scoped advisory lock per (definition, key), class
-- 7402, so that a relay buffered while the instance ends is seen by one of
-- the two.
CREATE FUNCTION sutra_release_start_buffer(p_instance text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    i record;
    m record;
BEGIN
    SELECT definition_key, start_correlation_key, status INTO i FROM instances WHERE id = p_instance;
    IF i.start_correlation_key IS NULL OR i.status = 'active' THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(7402, hashtext(i.definition_key || chr(31) || i.start_correlation_key));
    DELETE FROM buffered_messages b
     WHERE b.id = (SELECT id FROM buffered_messages
                    WHERE start_definition = i.definition_key AND correlation_key = i.start_correlation_key
                      AND expires_at > now()
                    ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING b.message_id, b.body, b.routing_key INTO m;
    IF FOUND THEN
        INSERT INTO outbox (id, instance_id, message_name, target, routing_key, body)
        VALUES ('start:' || i.definition_key || ':' || m.message_id, p_instance, 'start', 'relay', m.routing_key,
                convert_to(jsonb_set(convert_from(m.body, 'UTF8')::jsonb - 'ttl', '{start_only}', to_jsonb(i.definition_key))::text, 'UTF8'))
        ON CONFLICT (id) DO NOTHING;
    END IF;
END
$$;

-- A message-start relay whose key is held by an active instance: buffered
-- until that instance ends or the ttl passes ('buffered'), or, when the key
-- is free by now, handed back to start ('free'). 'duplicate': a copy was
-- buffered already.
CREATE FUNCTION sutra_buffer_start(p_definition text, p_key text, p_message_id text, p_ttl interval,
                                   p_variables jsonb, p_message text, p_body bytea, p_routing_key text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7402, hashtext(p_definition || chr(31) || p_key));
    IF NOT EXISTS (SELECT 1 FROM instances WHERE definition_key = p_definition AND start_correlation_key = p_key
                                              AND status = 'active') THEN
        RETURN 'free';
    END IF;
    INSERT INTO buffered_messages (message_id, message_name, correlation_key, variables, expires_at, body, routing_key, start_definition)
    VALUES (p_message_id, p_message, p_key, p_variables, now() + p_ttl, p_body, p_routing_key, p_definition)
    ON CONFLICT (message_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'duplicate';
    END IF;
    RETURN 'buffered';
END
$$;

-- A message-start relay buffered behind an active instance waits for that
-- instance's end, never for a subscription.
CREATE OR REPLACE FUNCTION sutra_buffered_match(p_instance text, p_tokens text[], p_elements text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    k record;
    m record;
BEGIN
    FOR k IN
        SELECT DISTINCT hashtext(s.message_name || chr(31) || s.correlation_key) AS h
          FROM subscriptions s JOIN unnest(p_tokens, p_elements) AS w(tok, el)
            ON s.instance_id = p_instance AND s.token_id = w.tok AND s.element_id = w.el
         ORDER BY 1 -- one order for every locker: no deadlock between two such commits
    LOOP
        PERFORM pg_advisory_xact_lock(7401, k.h);
    END LOOP;
    SELECT b.id, b.message_id, b.message_name, b.correlation_key, b.variables INTO m
      FROM subscriptions s JOIN unnest(p_tokens, p_elements) AS w(tok, el)
             ON s.instance_id = p_instance AND s.token_id = w.tok AND s.element_id = w.el
      JOIN buffered_messages b
             ON b.message_name = s.message_name AND b.correlation_key = s.correlation_key AND b.expires_at > now()
            AND b.start_definition IS NULL
     WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = b.message_id) -- a copy was applied directly
     ORDER BY b.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'buffered message % matches a subscription this step opened', m.message_id
            USING ERRCODE = 'SU003',
                  DETAIL = json_build_object('id', m.id, 'message_id', m.message_id, 'message', m.message_name,
                                             'correlation_key', m.correlation_key, 'variables', m.variables)::text;
    END IF;
END
$$;
