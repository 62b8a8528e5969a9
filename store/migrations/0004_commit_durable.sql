-- The step commit turns the synchronous WAL flush back on for its own
-- transaction (claims and releases skip it: they are soft state). Done here
-- with set_config rather than a SET LOCAL statement in the batch, which
-- PostgreSQL warns about on every step because a pipelined batch is an
-- implicit transaction, not a transaction block.
CREATE OR REPLACE FUNCTION sutra_commit(p_id text, p_owner text, p_version bigint, p_status text,
                                        p_variables jsonb, p_tokens jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
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
