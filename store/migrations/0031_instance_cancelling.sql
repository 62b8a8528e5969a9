-- An instance cancelled while user tasks in it run their canceling
-- listeners is 'cancelling' until their jobs are done, then 'cancelled'.
-- Until then it has not ended: it keeps the correlation key it was started
-- with, and a message-start relay for that key stays buffered behind it.
DROP INDEX instances_active_start_key;
CREATE UNIQUE INDEX instances_active_start_key ON instances (definition_key, start_correlation_key)
    WHERE status IN ('active', 'cancelling') AND start_correlation_key IS NOT NULL;

CREATE OR REPLACE FUNCTION sutra_release_start_buffer(p_instance text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    i record;
    m record;
BEGIN
    SELECT definition_key, start_correlation_key, status INTO i FROM instances WHERE id = p_instance;
    IF i.start_correlation_key IS NULL OR i.status IN ('active', 'cancelling') THEN
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
CREATE OR REPLACE FUNCTION sutra_buffer_start(p_definition text, p_key text, p_message_id text, p_ttl interval,
                                   p_variables jsonb, p_message text, p_body bytea, p_routing_key text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7402, hashtext(p_definition || chr(31) || p_key));
    IF NOT EXISTS (SELECT 1 FROM instances WHERE definition_key = p_definition AND start_correlation_key = p_key
                                              AND status IN ('active', 'cancelling')) THEN
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
