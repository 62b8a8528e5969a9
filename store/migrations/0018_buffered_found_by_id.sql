-- A commit's look for buffered messages raises its match with the row's id
-- only: DETAIL is the id, and the store reads the row after the rollback
-- (store.bufferedRow). Carrying the message's variables in DETAIL put an
-- unbounded JSON document in an error message.
--
-- The five-argument sutra_buffered_found (0013) stays for the replicas of
-- the previous build during a rollout.
CREATE FUNCTION sutra_buffered_found(p_id bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'buffered message % matches a subscription this step opened', p_id
        USING ERRCODE = 'SU003', DETAIL = p_id::text;
END
$$;
