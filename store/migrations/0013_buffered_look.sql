-- The look for buffered messages at the end of a commit that opens
-- subscriptions (issue 10). It was sutra_buffered_match, a PL/pgSQL function
-- that took the per-key advisory locks and then looked; each call cost about
-- twice its two statements (pg_stat_statements: 107-121 µs against 55, and
-- the most expensive statement of a relay step). The commit now sends the two
-- statements itself, in its pipeline (store.bufferedLocksSQL and
-- store.bufferedLookSQL), and calls this only when the look found a match, to
-- raise it: SU003 rolls the commit back, as before.
--
-- sutra_buffered_match stays for the replicas of the previous build during a
-- rollout (and for bench/ceiling.sql, issue 10's reference, which prices the
-- SQL as it was).
CREATE FUNCTION sutra_buffered_found(p_id bigint, p_message_id text, p_message text, p_key text, p_variables jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'buffered message % matches a subscription this step opened', p_message_id
        USING ERRCODE = 'SU003',
              DETAIL = json_build_object('id', p_id, 'message_id', p_message_id, 'message', p_message,
                                         'correlation_key', p_key, 'variables', p_variables)::text;
END
$$;
