-- The claim moves out of instances into a narrow table of its own (issue 28),
-- so that a step's update of its instance row is HOT.
--
-- Migration 0010 set fillfactor 80 on instances so that a step's updates
-- could be HOT (the new row version on the same page, no index entry
-- written, the old one pruned without vacuum). None was: the claim set owner
-- and claimed_at, the commit cleared them, and instances_claimed_at
-- (claimed_at, WHERE owner IS NOT NULL), the sweep's index, covers both (its
-- key and its predicate). Every step wrote two row versions of instances
-- and an entry in each of its indexes for each.
--
-- Now a claims row exists only while its instance is claimed: the claim
-- inserts it (or takes over a stale one), the commit and every release
-- delete it, the sweep finds the stale ones on claims_claimed_at. The claim
-- statement only locks the instance row (FOR NO KEY UPDATE: it waits for a
-- commit in flight and loads the row that commit wrote); the commit's update
-- of instances changes status, variables, tokens, version and updated_at,
-- none of them indexed (status is in the predicates of
-- instances_active_start_key and instances_active_definition, so the step
-- that ends an instance is the one not HOT). Whoever touches both tables
-- locks the instance row first, then the claims row: claim, commit,
-- release and sweep alike, so that none of them deadlocks another.
--
-- Replicas running the code of before this migration fail their claims
-- (the columns are gone) until they are replaced: stop them before it runs.
-- The claims held when it runs move over with their age.
CREATE TABLE claims (
    instance_id text        PRIMARY KEY,
    owner       text        NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX claims_claimed_at ON claims (claimed_at);

INSERT INTO claims (instance_id, owner, claimed_at)
SELECT id, owner, COALESCE(claimed_at, now()) FROM instances WHERE owner IS NOT NULL;

DROP INDEX instances_claimed_at;
ALTER TABLE instances DROP COLUMN owner, DROP COLUMN claimed_at;

-- The commit fence: the instance at the version read at claim time, and
-- the claim still this owner's. The UPDATE comes first so that the instance
-- row is locked before the claims row (the order every writer keeps);
-- raising rolls back the UPDATE with everything else of the step.
CREATE OR REPLACE FUNCTION sutra_commit(p_id text, p_owner text, p_version bigint, p_status text,
                                        p_variables jsonb, p_tokens jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    UPDATE instances
       SET status = p_status, variables = p_variables, tokens = p_tokens,
           version = version + 1, updated_at = now()
     WHERE id = p_id AND version = p_version;
    IF FOUND THEN
        DELETE FROM claims WHERE instance_id = p_id AND owner = p_owner;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'instance % is not claimed by % at version %', p_id, p_owner, p_version
            USING ERRCODE = 'SU001';
    END IF;
    RETURN p_version + 1;
END
$$;
