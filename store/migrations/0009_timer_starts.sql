-- Timer start events: a deployed process's schedule is a timers row per
-- timer start event, marked by definition_key. Its instance_id is the id of
-- the instance its next fire starts (sutra_timer_start_id), so that a fire's
-- step creates that instance and moves the row to the following fire in one
-- commit: a fire starts its instance exactly once whoever fires it.
ALTER TABLE timers
    ADD COLUMN definition_key     text,
    ADD COLUMN definition_version integer,
    ADD COLUMN fired              integer NOT NULL DEFAULT 0;

-- One schedule per start event of a process key: deploying a new version
-- replaces the previous version's (as Zeebe does).
CREATE UNIQUE INDEX timers_start_schedule ON timers (definition_key, element_id) WHERE definition_key IS NOT NULL;

CREATE FUNCTION sutra_timer_start_id(p_key text, p_version integer, p_element text, p_fired integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT md5('sutra.timer-start' || chr(31) || p_key || chr(31) || p_version || chr(31) || p_element || chr(31) || p_fired)::uuid::text
$$;

-- Moves a fired schedule row to its next fire, in the fire's commit. Gone
-- (the process was deployed again meanwhile, replacing the schedule): SU002,
-- as for a consumed timer, which rolls the start back.
CREATE FUNCTION sutra_rearm_start_timer(p_id bigint, p_instance text, p_due timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE timers
       SET fired = fired + 1, due_at = p_due, attempts = 0, locked_by = NULL, locked_until = NULL,
           instance_id = sutra_timer_start_id(definition_key, definition_version, element_id, fired + 1)
     WHERE id = p_id AND instance_id = p_instance AND definition_key IS NOT NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'timer start % (instance %) is gone: its schedule was replaced', p_id, p_instance
            USING ERRCODE = 'SU002';
    END IF;
END
$$;
