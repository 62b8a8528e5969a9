-- A timer whose fires keep failing stops in an incident instead of being
-- deferred for ever. failures counts the failed fires (never a refusal: a held
-- claim is not a failure); attempts still counts every deferral, for the
-- backoff. incident_id is set while the timer is parked in its incident: the
-- pollers skip the row until an admin retry clears it.
ALTER TABLE timers
    ADD COLUMN failures    integer NOT NULL DEFAULT 0,
    ADD COLUMN incident_id bigint;

-- The pollers' look reads only timers not parked.
DROP INDEX timers_due_at;
CREATE INDEX timers_due_at ON timers (due_at) WHERE incident_id IS NULL;

-- A parked timer's incident is resolved when the timer is no longer parked:
-- its row deleted (its wait closed: a cancel, a boundary event, a redeploy of
-- a timer start) or re-armed (an admin retry, a step arming the same wait).
CREATE FUNCTION sutra_resolve_timer_incident() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE incidents SET resolved_at = now() WHERE id = OLD.incident_id AND resolved_at IS NULL;
    RETURN NULL;
END
$$;
CREATE TRIGGER timers_incident_deleted AFTER DELETE ON timers
    FOR EACH ROW WHEN (OLD.incident_id IS NOT NULL) EXECUTE FUNCTION sutra_resolve_timer_incident();
CREATE TRIGGER timers_incident_cleared AFTER UPDATE OF incident_id ON timers
    FOR EACH ROW WHEN (OLD.incident_id IS NOT NULL AND NEW.incident_id IS DISTINCT FROM OLD.incident_id)
    EXECUTE FUNCTION sutra_resolve_timer_incident();

-- The transient failures of each relay, counted by whichever replica saw
-- them, so that SUTRA_RELAY_MAX_RETRIES caps a relay across replicas and
-- restarts. Trimmed by the sweeper like the inbox.
CREATE TABLE relay_attempts (
    message_id text        PRIMARY KEY,
    attempts   integer     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX relay_attempts_updated_at ON relay_attempts (updated_at);
