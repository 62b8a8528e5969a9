-- The one-round-trip batch commit (issue 10). store.CommitBatch sends the
-- fence of every step, every step's writes and COMMIT in one pipeline; the
-- fence counts the rows it updated and this raises when one of the batch was
-- not claimed by its step's owner at its version, so that the writes queued
-- behind it never run and the batch is retried the slow way (fence first,
-- then the writes of the steps that passed).
CREATE FUNCTION sutra_batch_fence(p_fenced bigint, p_steps bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_fenced <> p_steps THEN
        RAISE EXCEPTION '% of % steps of the batch are not claimed at their version', p_steps - p_fenced, p_steps
            USING ERRCODE = 'SU005';
    END IF;
END
$$;
