-- The instance list sorted by start or end time, newest first, and
-- searched by business key (issue 40). created_at and start_correlation_key
-- never change after an instance is created, and ended_at is set once, in
-- the step that ends it (whose status change is not a HOT update anyway):
-- none of these indexes costs the steps' HOT updates.
--
-- ended_at is set by a trigger, not by the commit, so that a replica of the
-- previous release, which does not know the column, sets it too: the
-- trigger's WHEN is checked on every write of an instance row, and the
-- function runs only on the write that ends it.
ALTER TABLE instances ADD COLUMN ended_at timestamptz;

CREATE FUNCTION sutra_instance_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.ended_at := NEW.updated_at;
    RETURN NEW;
END
$$;

CREATE TRIGGER instances_ended BEFORE INSERT OR UPDATE ON instances
    FOR EACH ROW WHEN (NEW.status NOT IN ('active', 'cancelling') AND NEW.ended_at IS NULL)
    EXECUTE FUNCTION sutra_instance_ended();

-- Instances that ended before this migration ended at their last write.
UPDATE instances SET ended_at = updated_at WHERE status NOT IN ('active', 'cancelling');

CREATE INDEX instances_created ON instances (created_at, id);
CREATE INDEX instances_definition_created ON instances (definition_key, created_at, id);
CREATE INDEX instances_ended ON instances (ended_at, id) WHERE ended_at IS NOT NULL;
CREATE INDEX instances_start_key ON instances (start_correlation_key) WHERE start_correlation_key IS NOT NULL;
