-- Timer fires, the sweep and message buffering.

-- A buffered relay keeps its original body and routing key so that, when its
-- TTL passes with no subscription, it is dead-lettered unchanged.
ALTER TABLE buffered_messages
    ADD COLUMN body        bytea NOT NULL DEFAULT '',
    ADD COLUMN routing_key text  NOT NULL DEFAULT '';

-- A poller that stops hands back the rows it leased by this index.
CREATE INDEX timers_locked_by ON timers (locked_by) WHERE locked_by IS NOT NULL;

-- The fire's commit consumes exactly its own timer row. The row is gone when
-- the wait was closed (a message won the event-based gateway, an interrupting
-- boundary event fired) after the poller read it: raising aborts the whole
-- commit batch, so a fire never commits against a cancelled wait.
CREATE FUNCTION sutra_consume_timer(p_id bigint, p_instance text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM timers WHERE id = p_id AND instance_id = p_instance;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'timer % of instance % is gone: its wait was closed', p_id, p_instance
            USING ERRCODE = 'SU002';
    END IF;
END
$$;

-- Buffering and subscribing meet under one transaction-scoped advisory lock
-- per (message name, correlation key), class 7401. Whichever takes it second
-- sees what the first committed: a relay that buffers after a subscription
-- opened finds the subscription, and a step that opens a subscription after a
-- relay was buffered finds the message. Without the lock both could miss each
-- other under READ COMMITTED and the message would sit until its TTL.

-- Runs last in a commit batch that opened subscriptions. Nothing buffered:
-- returns (the common case, no extra round trip). A live buffered match for
-- a subscription still open in this transaction: raises SU003 with the oldest
-- match in DETAIL, which rolls the commit back; the step then applies that
-- message too and commits both in one transaction.
CREATE FUNCTION sutra_buffered_match(p_instance text, p_tokens text[], p_elements text[]) RETURNS void
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

-- The chained step's commit consumes the buffered message it applied and
-- records its message id in the inbox, like a relay's commit. Gone (another
-- instance's step consumed it first, or it expired) or already applied (a copy
-- of the relay committed directly): raises SU004 and the step recomputes
-- without it.
CREATE FUNCTION sutra_consume_buffered(p_id bigint, p_instance text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    mid text;
BEGIN
    DELETE FROM buffered_messages WHERE id = p_id AND expires_at > now() RETURNING message_id INTO mid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'buffered message % is gone', p_id USING ERRCODE = 'SU004';
    END IF;
    INSERT INTO inbox (message_id, instance_id) VALUES (mid, p_instance) ON CONFLICT (message_id) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'buffered message % was already applied', mid USING ERRCODE = 'SU004';
    END IF;
END
$$;

-- A correlate-by-key relay with a TTL: the instance whose oldest open
-- subscription matches, or (none) the relay is buffered until its TTL.
-- applied: a committed step already applied this message id.
CREATE FUNCTION sutra_resolve_or_buffer(p_name text, p_key text, p_message_id text, p_ttl interval,
                                        p_variables jsonb, p_body bytea, p_routing_key text,
                                        OUT instance_id text, OUT applied boolean)
LANGUAGE plpgsql AS $$
BEGIN
    applied := EXISTS (SELECT 1 FROM inbox WHERE message_id = p_message_id);
    IF applied THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(7401, hashtext(p_name || chr(31) || p_key));
    SELECT s.instance_id INTO instance_id FROM subscriptions s
     WHERE s.message_name = p_name AND s.correlation_key = p_key ORDER BY s.created_at LIMIT 1;
    IF instance_id IS NULL THEN
        INSERT INTO buffered_messages (message_id, message_name, correlation_key, variables, expires_at, body, routing_key)
        VALUES (p_message_id, p_name, p_key, p_variables, now() + p_ttl, p_body, p_routing_key)
        ON CONFLICT (message_id) DO NOTHING; -- a redelivered copy is buffered once
    END IF;
END
$$;
